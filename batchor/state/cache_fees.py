"""The ledger's cache fees: what a provider bills for a cache a run holds apart from its requests
(Gemini explicit context caches, providers/gemini/context.py and batch_cache.py), one row per
cache, with the run that made it, attributed
to the step it serves. Written when the cache is made (creation, and storage until its expiry:
what the provider bills if the run is killed now), and again when it is renewed or deleted
(storage until then). Spend (state/spend.py) adds them to the run's. Portable SQL over
`store.connection()`: DuckDB and PostgreSQL alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from batchor.state.base import StateStore

_TABLE = """CREATE TABLE IF NOT EXISTS cache_fees (
    run_id VARCHAR, name VARCHAR, step VARCHAR, provider VARCHAR, model VARCHAR, tokens BIGINT,
    created_s {real}, held_until_s {real}, deleted BOOLEAN, creation_usd {real}, storage_usd {real},
    PRIMARY KEY (run_id, name))"""
CACHE_FEES_TABLE = _TABLE.format(real="DOUBLE")
PG_CACHE_FEES_TABLE = _TABLE.format(real="DOUBLE PRECISION")


@dataclass(frozen=True, slots=True)
class CacheFeeEntry:
    """One cache's fees as far as they are known: made at `created_s`, held until `held_until_s`."""

    run_id: str
    name: str
    step: str
    provider: str
    model: str
    tokens: int
    created_s: float
    held_until_s: float
    deleted: bool
    creation_usd: float
    storage_usd: float


def record_cache_fee(store: StateStore, entry: CacheFeeEntry) -> float:
    """Store `entry`, replacing what was recorded for the same cache; returns what that was (USD).

    A cache outlives a run when a batch step's jobs do (a later apply collects them and deletes
    it): its entry stays with the run that made it, so its fee is counted once."""
    with store.connection() as db:
        db.execute("BEGIN TRANSACTION")
        try:
            found = db.execute(
                "SELECT run_id, creation_usd + storage_usd FROM cache_fees WHERE name = ? ORDER BY created_s LIMIT 1",
                [entry.name],
            ).fetchone()
            run_id, before = (str(found[0]), float(found[1])) if found else (entry.run_id, 0.0)
            values = [run_id, entry.name, entry.step, entry.provider, entry.model, entry.tokens, entry.created_s]
            values += [entry.held_until_s, entry.deleted, entry.creation_usd, entry.storage_usd]
            db.execute("DELETE FROM cache_fees WHERE name = ?", [entry.name])
            db.execute(f"INSERT INTO cache_fees VALUES ({', '.join('?' * len(values))})", values)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    return before


def run_cache_fees(store: StateStore, run_ids: list[str]) -> dict[str, tuple[float, int]]:
    """Per run id that held caches: their fees (creation and storage, USD) and how many caches."""
    if not run_ids:
        return {}
    rows = store.execute(
        "SELECT run_id, coalesce(sum(creation_usd + storage_usd), 0), count(*) FROM cache_fees "
        f"WHERE run_id IN ({', '.join('?' * len(run_ids))}) GROUP BY run_id",
        list(run_ids),
    )
    return {str(run_id): (float(usd), int(n)) for run_id, usd, n in rows}
