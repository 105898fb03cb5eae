"""Where the state lives: one state per project, wherever the command is run from.

Every path in a spec is relative to the spec, so the state is found from the spec too, never
from the working folder alone. In order:

1. `--state PATH|URL`, then `BATCHOR_STATE` (a relative path is relative to the working folder);
2. the spec's `state:` (a relative path is relative to the spec's folder);
3. `.batchor/state.duckdb` in the nearest folder at or above the spec's folder that holds a
   `.batchor/` folder, stopping at the spec's git repository root;
4. else in the spec's git repository root (the nearest folder holding `.git`);
5. else in the spec's folder.

Commands without a spec (status, runs, export, ...) search the same way from the working folder.
File locations are made absolute, so a saved plan names its state wherever it is applied from.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from batchor.state.postgres_store import is_postgres

STATE_DIR = ".batchor"
DEFAULT_STATE = Path(STATE_DIR) / "state.duckdb"


@dataclass(frozen=True)
class StateChoice:
    """The state a command uses, and why (the plan prints both)."""

    location: str  # an absolute DuckDB file path, or a database URL
    source: str


def find_state(explicit: str | None = None, spec_state: str | None = None,
               spec_dir: Path | str | None = None) -> StateChoice:
    """The state to use: the command line, the environment, the spec, else the project's (see module doc)."""
    if explicit:
        return StateChoice(_absolute(explicit, Path.cwd()), "--state")
    from_env = os.environ.get("BATCHOR_STATE")
    if from_env:
        return StateChoice(_absolute(from_env, Path.cwd()), "BATCHOR_STATE")
    start = Path(spec_dir) if spec_dir is not None else Path.cwd()
    if spec_state:
        return StateChoice(_absolute(spec_state, start), "the spec's `state:`")
    folder, why = project_folder(start, "the spec's folder" if spec_dir is not None else "the working folder")
    return StateChoice(str(folder / DEFAULT_STATE), why)


def project_folder(start: Path, fallback: str) -> tuple[Path, str]:
    """The nearest folder at or above `start` holding `.batchor/`, else the git root, else `start`."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / STATE_DIR).is_dir():
            return folder, f"{STATE_DIR}/ found in {folder}"
        if (folder / ".git").exists():
            return folder, f"the git repository root {folder}"
    return start, fallback


def _absolute(location: str, base: Path) -> str:
    if is_postgres(location):
        return location
    path = Path(location).expanduser()
    return str(path if path.is_absolute() else (base / path).resolve())
