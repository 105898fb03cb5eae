"""Durable record of provider batches: the part of the state that keeps a run from paying twice.

A batch row is written as an *intent* (with the request keys it carries) before the provider's
create call; the remote id is stored the moment it is known. Every change is a named transition,
one transaction each::

    intent -> submitted -> completed | failed | expired | cancelled -> collected
    intent -> collected                    (create refused, or nothing was created remotely)

A batch that is not `collected` is *live*: its keys are not sent again, and the next apply
re-attaches to it (reconciling an intent with the provider first).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field, fields
from typing import Any

import pyarrow as pa

from batchor.state.base import StateStore

LIVE_STATES = ("intent", "submitted", "completed", "failed", "expired", "cancelled")
# Outcomes of a row in one batch. `retry` used an attempt; `retry_free` (rate limit, quota) and
# `missing` (no result: batch expired or cancelled first) did not; `unsent` (the create never
# happened) is not an attempt at all.
CONSUMED = ("ok", "failed", "retry")


@dataclass
class BatchRecord:
    batch_id: str
    job_id: str
    run_id: str
    step: str
    step_fp: str
    provider: str
    model: str
    connection: str  # JSON: base_url, api_key_env, api; never a key
    chunk: int
    state: str = "intent"
    remote_id: str | None = None
    remote_status: str | None = None
    requests: int = 0
    input_tokens: int = 0
    bytes: int = 0
    succeeded: int = 0
    failed: int = 0
    requeued: int = 0
    error: str | None = None
    created_s: float = 0.0  # epoch seconds of the intent (compared with the provider's clock)
    created_at: Any = None
    submitted_at: Any = None
    updated_at: Any = None
    ended_at: Any = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES

    def connection_dict(self) -> dict[str, Any]:
        handle: dict[str, Any] = json.loads(self.connection or "{}")
        return handle


_COLUMNS = tuple(f.name for f in fields(BatchRecord) if f.name != "extra")
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM batches"


class BatchLedger:
    """Batch transitions and queries over a `DuckDBStore` (short connections, like the store)."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    # --- transitions -----------------------------------------------------------------------

    def record_intent(self, batch: BatchRecord, keys: list[str]) -> None:
        """The batch and its keys, before anything is sent: a crash from here on is recoverable."""
        names = [c for c in _COLUMNS if c not in ("created_at", "submitted_at", "updated_at", "ended_at")]
        values = [getattr(batch, c) for c in names]
        probe = pa.table({"k": pa.array(keys, pa.string())})
        with self.store.connection() as db:
            db.execute("BEGIN")
            db.execute(
                f"INSERT INTO batches ({', '.join(names)}, created_at, updated_at) "
                f"VALUES ({', '.join('?' * len(names))}, now(), now())",
                values,
            )
            db.register("new_keys", probe)
            db.execute("INSERT INTO batch_requests SELECT ?, k, NULL FROM new_keys", [batch.batch_id])
            db.unregister("new_keys")
            db.execute("COMMIT")

    def mark_submitted(self, batch_id: str, remote_id: str, remote_status: str | None) -> None:
        self._update(
            batch_id,
            "state = 'submitted', remote_id = ?, remote_status = ?, submitted_at = now()",
            [remote_id, remote_status],
        )

    def mark_polled(self, batch_id: str, remote_status: str) -> None:
        self._update(batch_id, "remote_status = ?", [remote_status])

    def mark_ended(self, batch_id: str, state: str, remote_status: str | None, error: str | None) -> None:
        self._update(
            batch_id,
            "state = ?, remote_status = ?, error = coalesce(?, error), ended_at = now()",
            [state, remote_status, error],
        )

    def mark_collected(self, batch_id: str, outcomes: dict[str, str], error: str | None = None) -> None:
        """Every row's outcome and the batch's counts, in one transaction (the batch is no longer live)."""
        table = pa.table(
            {"k": pa.array(list(outcomes), pa.string()), "o": pa.array(list(outcomes.values()), pa.string())}
        )
        counts: defaultdict[str, int] = defaultdict(int)
        for outcome in outcomes.values():
            counts[outcome] += 1
        requeued = counts["retry"] + counts["retry_free"] + counts["missing"]
        with self.store.connection() as db:
            db.execute("BEGIN")
            db.register("outcomes", table)
            db.execute(
                "UPDATE batch_requests SET outcome = o.o FROM outcomes o "
                "WHERE batch_requests.batch_id = ? AND batch_requests.request_key = o.k",
                [batch_id],
            )
            db.unregister("outcomes")
            db.execute(
                "UPDATE batches SET state = 'collected', succeeded = ?, failed = ?, requeued = ?, "
                "error = coalesce(?, error), updated_at = now(), ended_at = coalesce(ended_at, now()) "
                "WHERE batch_id = ?",
                [counts["ok"], counts["failed"], requeued, error, batch_id],
            )
            db.execute("COMMIT")

    def _update(self, batch_id: str, sets: str, args: list[Any]) -> None:
        with self.store.connection() as db:
            db.execute(f"UPDATE batches SET {sets}, updated_at = now() WHERE batch_id = ?", [*args, batch_id])

    # --- queries ---------------------------------------------------------------------------

    def live_batches(self, step_fp: str) -> list[BatchRecord]:
        """Batches of this request family not collected yet, oldest first."""
        states = ", ".join(f"'{s}'" for s in LIVE_STATES)
        return self._select(f"WHERE step_fp = ? AND state IN ({states}) ORDER BY created_at, chunk", [step_fp])

    def live_families(self) -> set[str]:
        """The request families (`step_fp`) with a batch not collected yet: one query for a
        wave's steps, which then ask `live_batches` only when theirs is among them."""
        states = ", ".join(f"'{s}'" for s in LIVE_STATES)
        with self.store.connection() as db:
            rows = db.execute(f"SELECT DISTINCT step_fp FROM batches WHERE state IN ({states})").fetchall()
        return {str(r[0]) for r in rows}

    def job_batches(self, job_id: str, live_only: bool = False) -> list[BatchRecord]:
        where = "WHERE job_id = ?"
        if live_only:
            where += f" AND state IN ({', '.join(repr(s) for s in LIVE_STATES)})"
        return self._select(f"{where} ORDER BY created_at, step, chunk", [job_id])

    def get(self, batch_id: str) -> BatchRecord | None:
        found = self._select("WHERE batch_id = ?", [batch_id])
        return found[0] if found else None

    def next_chunk(self, job_id: str, step: str) -> int:
        with self.store.connection() as db:
            rows = db.execute(
                "SELECT coalesce(max(chunk) + 1, 0) FROM batches WHERE job_id = ? AND step = ?", [job_id, step]
            ).fetchall()
        return int(rows[0][0])

    def batch_keys(self, batch_id: str) -> list[str]:
        with self.store.connection() as db:
            rows = db.execute("SELECT request_key FROM batch_requests WHERE batch_id = ?", [batch_id]).fetchall()
        return [r[0] for r in rows]

    def claimed_remote_ids(self, provider: str) -> set[str]:
        with self.store.connection() as db:
            rows = db.execute(
                "SELECT remote_id FROM batches WHERE provider = ? AND remote_id IS NOT NULL", [provider]
            ).fetchall()
        return {r[0] for r in rows}

    def durations(self, provider: str, model: str, requests: int, last: int = 20) -> list[float]:
        """Seconds from submit to seen ended of the latest collected batches of this provider and
        model with about `requests` rows (a quarter to four times as many): the polls' history."""
        with self.store.connection() as db:
            rows = db.execute(
                "SELECT date_part('epoch', ended_at) - date_part('epoch', submitted_at) FROM batches "
                "WHERE provider = ? AND model = ? AND state = 'collected' AND succeeded > 0 "
                "AND submitted_at IS NOT NULL AND ended_at IS NOT NULL AND requests BETWEEN ? AND ? "
                "ORDER BY ended_at DESC LIMIT ?",
                [provider, model, max(1, requests // 4), requests * 4, last],
            ).fetchall()
        return [float(r[0]) for r in rows if r[0] is not None]

    def attempts_used(self, keys: list[str]) -> dict[str, tuple[int, int]]:
        """Per key: (attempts used, free retries) in batches since its last final failure."""
        if not keys:
            return {}
        probe = pa.table({"k": pa.array(keys, pa.string())})
        with self.store.connection() as db:
            db.register("probe", probe)
            rows = db.execute(
                "SELECT br.request_key, br.outcome FROM batch_requests br JOIN probe p ON br.request_key = p.k "
                "JOIN batches b ON b.batch_id = br.batch_id WHERE br.outcome IS NOT NULL "
                "ORDER BY b.created_at, b.chunk"
            ).fetchall()
            db.unregister("probe")
        used: dict[str, tuple[int, int]] = {}
        for key, outcome in rows:
            spent, free = used.get(key, (0, 0))
            if outcome == "failed":  # a final failure: a later apply starts the row afresh
                spent, free = 0, 0
            elif outcome in CONSUMED:
                spent += 1
            elif outcome in ("retry_free", "missing"):
                free += 1
            used[key] = (spent, free)
        return used

    def _select(self, where: str, args: list[Any]) -> list[BatchRecord]:
        with self.store.connection() as db:
            rows = db.execute(f"{_SELECT} {where}", args).fetchall()
        return [BatchRecord(**dict(zip(_COLUMNS, row))) for row in rows]


def batch_summary(batch: BatchRecord) -> dict[str, Any]:
    """What `status` shows of a batch."""
    keys = (
        "batch_id",
        "step",
        "chunk",
        "provider",
        "model",
        "state",
        "remote_id",
        "remote_status",
        "requests",
        "succeeded",
        "failed",
        "requeued",
        "error",
        "created_at",
        "updated_at",
    )
    return {k: getattr(batch, k) for k in keys}
