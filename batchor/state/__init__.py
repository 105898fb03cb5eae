"""Durable state: run history, the result cache keyed by request key, attempts.

`open_state()` picks the backend from the location: a file path (DuckDB, the default) or a
postgresql:// URL (shared by several workers).
"""

from __future__ import annotations

import os
from pathlib import Path

from batchor.state.duckdb_store import DuckDBStore
from batchor.state.lock import ApplyLock

DEFAULT_STATE = Path(".batchor") / "state.duckdb"


def state_location(explicit: str | None = None, spec_state: str | None = None) -> str:
    """--state wins, then BATCHOR_STATE, then the spec's `state:`, then .batchor/state.duckdb."""
    return explicit or os.environ.get("BATCHOR_STATE") or spec_state or str(DEFAULT_STATE)


def open_state(location: str) -> DuckDBStore:
    if location.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        from batchor.errors import StateError

        raise StateError("PostgreSQL state is not available in this version", hint="use a DuckDB file path")
    return DuckDBStore(Path(location))


def apply_lock(location: str) -> ApplyLock:
    return ApplyLock(Path(location + ".lock"))


__all__ = ["DEFAULT_STATE", "ApplyLock", "DuckDBStore", "apply_lock", "open_state", "state_location"]
