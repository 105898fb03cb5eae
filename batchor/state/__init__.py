"""Durable state: run history, the result cache keyed by request key, attempts.

`open_state()` picks the backend from the location: a file path (DuckDB, the default) or a
postgresql:// URL (shared by several workers).
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from pathlib import Path
from typing import Any, ContextManager

from batchor.state.duckdb_store import DuckDBStore
from batchor.state.lock import ApplyLock
from batchor.state.postgres_store import PostgresStore, is_postgres

DEFAULT_STATE = Path(".batchor") / "state.duckdb"


def state_location(explicit: str | None = None, spec_state: str | None = None) -> str:
    """--state wins, then BATCHOR_STATE, then the spec's `state:`, then .batchor/state.duckdb."""
    return explicit or os.environ.get("BATCHOR_STATE") or spec_state or str(DEFAULT_STATE)


def open_state(location: str) -> Any:
    """DuckDBStore for a file path, PostgresStore for a postgresql:// or postgres:// URL."""
    if is_postgres(location):
        return PostgresStore(location)
    return DuckDBStore(Path(location))


def apply_lock(location: str) -> ContextManager[Any]:
    """Exclusive apply on a DuckDB file; none on PostgreSQL, where several workers share a run."""
    if is_postgres(location):
        return nullcontext()
    return ApplyLock(Path(location + ".lock"))


__all__ = ["DEFAULT_STATE", "ApplyLock", "DuckDBStore", "PostgresStore", "apply_lock", "is_postgres", "open_state",
           "state_location"]
