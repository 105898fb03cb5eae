"""Durable state: run history, the result cache keyed by request key, attempts.

`open_state()` picks the backend from the location: a file path (DuckDB, the default) or a
postgresql:// URL (shared by several workers).
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Any, ContextManager

from batchor.state.duckdb_store import DuckDBStore
from batchor.state.location import DEFAULT_STATE, StateChoice, find_state
from batchor.state.lock import ApplyLock
from batchor.state.postgres_store import PostgresStore, is_postgres


def state_location(explicit: str | None = None, spec_state: str | None = None,
                   spec_dir: Path | str | None = None) -> str:
    """--state wins, then BATCHOR_STATE, then the spec's `state:`, then the project's (state/location.py)."""
    return find_state(explicit, spec_state, spec_dir).location


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


__all__ = ["DEFAULT_STATE", "ApplyLock", "DuckDBStore", "PostgresStore", "StateChoice", "apply_lock", "find_state",
           "is_postgres", "open_state", "state_location"]
