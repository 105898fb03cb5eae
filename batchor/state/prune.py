"""Named writes that shrink the state: drop raw payloads, and (only when asked) cached answers.

They write through `store.connection()` in portable SQL, so DuckDB and PostgreSQL prune alike;
operator code never sends writes through the read-only `execute`.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from batchor.state.base import StateStore


def _where(column: str, before: dt.datetime | None, finished_only: bool) -> tuple[str, list[Any]]:
    conditions, args = [], []
    if before is not None:
        conditions.append(f"{column} < ?")
        args.append(before)
    if finished_only:
        conditions.append("run_id IN (SELECT run_id FROM runs WHERE finished_at IS NOT NULL)")
    return " AND ".join(conditions) or "TRUE", args


def drop_raw_payloads(store: StateStore, *, before: dt.datetime | None = None, finished_only: bool = False) -> int:
    """Forget raw request/response bodies of attempts (the audit trail); tokens and costs stay.
    Returns how many payloads were dropped."""
    where, args = _where("created_at", before, finished_only)
    with store.connection() as db:
        (count,) = db.execute(f"SELECT count(*) FROM attempts WHERE raw IS NOT NULL AND {where}", args).fetchall()[0]
        db.execute(f"UPDATE attempts SET raw = NULL WHERE raw IS NOT NULL AND {where}", args)
    return int(count)


def drop_answers(store: StateStore, *, before: dt.datetime | None = None, finished_only: bool = False) -> int:
    """Delete stored answers: the cache forgets them, so a later apply pays for them again."""
    where, args = _where("finished_at", before, finished_only)
    with store.connection() as db:
        (count,) = db.execute(f"SELECT count(*) FROM results WHERE {where}", args).fetchall()[0]
        db.execute(f"DELETE FROM results WHERE {where}", args)
    return int(count)


def reclaim_space(store: StateStore) -> None:
    """Let DuckDB reuse the blocks freed by a prune at once (PostgreSQL's autovacuum does this
    itself, and the session treats CHECKPOINT as a no-op)."""
    with store.connection() as db:
        db.execute("CHECKPOINT")


def attempt_log(store: StateStore, run_id: str) -> list[tuple[Any, ...]]:
    """A run's attempts in order, raw bodies still packed: the audit trail `export --attempts` writes."""
    return store.execute(
        "SELECT request_key, attempt, outcome, status_code, error, duration_ms, raw, created_at, "
        "input_tokens, output_tokens, cost_usd, estimated "
        "FROM attempts WHERE run_id = ? ORDER BY created_at",
        [run_id],
    )
