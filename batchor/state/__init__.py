"""Durable state: run history, the result cache keyed by request key, attempts.

`open_state()` picks the backend from the location: a file path (DuckDB, the default) or a
postgresql:// URL (shared by several workers).
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Any, ContextManager

from batchor.errors import NoStateError
from batchor.state.base import StateStore
from batchor.state.duckdb_store import DuckDBStore
from batchor.state.location import DEFAULT_STATE, StateChoice, find_state, states_below
from batchor.state.lock import ApplyLock
from batchor.state.postgres_store import PostgresStore, is_postgres


def state_location(
    explicit: str | None = None, spec_state: str | None = None, spec_dir: Path | str | None = None
) -> str:
    """--state wins, then BATCHOR_STATE, then the spec's `state:`, then the project's (state/location.py)."""
    return find_state(explicit, spec_state, spec_dir).location


def open_state(location: str) -> StateStore:
    """DuckDBStore for a file path, PostgresStore for a postgresql:// or postgres:// URL."""
    if is_postgres(location):
        return PostgresStore(location)
    return DuckDBStore(Path(location))


def open_existing_state(
    explicit: str | None = None, spec_state: str | None = None, spec_dir: Path | str | None = None
) -> StateStore:
    """The state a read-only command (status, results, export, report...) reads. None there yet
    is `no_state`: opening one would create an empty `.batchor/` where the user happened to be."""
    choice = find_state(explicit, spec_state, spec_dir)
    if not state_exists(choice.location):
        raise NoStateError(
            f"no batchor state yet: {choice.location} does not exist (its location comes from {choice.source})",
            hint=missing_state_hint(choice, searched=spec_dir is None and not spec_state),
        )
    return open_state(choice.location)


def missing_state_hint(choice: StateChoice, searched: bool = True) -> str:
    """How to reach the state a command did not find: the states below the working folder when
    it searched from there (`searched`: no spec; outside a git repository a spec's state sits in
    the spec's folder). A state named by --state or BATCHOR_STATE was not searched for."""
    searched = searched and choice.source not in ("--state", "BATCHOR_STATE")
    found = states_below(Path.cwd()) if searched else []
    if found:
        named = ", ".join(_relative(p) for p in found)
        return (
            f"a state was found below this folder ({named}): name it with `--state {_relative(found[0])}` "
            f"(or BATCHOR_STATE), or run this from {_relative(found[0].parent.parent)}/"
        )
    return (
        "run `batchor apply SPEC` first, which creates it (`batchor plan SPEC` prints where); or run this "
        "from the project that holds the state, or name it with --state PATH (or BATCHOR_STATE)"
    )


def _relative(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def state_exists(location: str) -> bool:
    """Whether there is a state at `location` to read (a database URL is assumed to be one)."""
    return is_postgres(location) or Path(location).is_file()


def apply_lock(location: str) -> ContextManager[Any]:
    """Exclusive apply on a DuckDB file; none on PostgreSQL, where several workers share a run."""
    if is_postgres(location):
        return nullcontext()
    return ApplyLock(Path(location + ".lock"))


__all__ = [
    "DEFAULT_STATE",
    "ApplyLock",
    "DuckDBStore",
    "PostgresStore",
    "StateChoice",
    "StateStore",
    "apply_lock",
    "find_state",
    "is_postgres",
    "missing_state_hint",
    "open_existing_state",
    "open_state",
    "state_exists",
    "state_location",
]
