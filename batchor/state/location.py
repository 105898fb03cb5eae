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


def find_state(
    explicit: str | None = None, spec_state: str | None = None, spec_dir: Path | str | None = None
) -> StateChoice:
    """The state to use: the command line, the environment, the spec, else the project's (see module doc)."""
    if explicit:
        return StateChoice(_absolute(explicit, Path.cwd()), "--state")
    from_env = os.environ.get("BATCHOR_STATE")
    if from_env:
        return StateChoice(_absolute(from_env, Path.cwd()), "BATCHOR_STATE")
    start = Path(spec_dir) if spec_dir is not None else Path.cwd()
    if spec_state:
        return StateChoice(_absolute(spec_state, start), "the spec's `state:`")
    fallback = (
        "the spec's folder"
        if spec_dir is not None
        else "the working folder: no .batchor/ folder or git repository at or above it"
    )
    folder, why = project_folder(start, fallback)
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


def states_below(folder: Path, depth: int = 3, most: int = 3, visits: int = 2000) -> list[Path]:
    """DuckDB states in project folders below `folder` (a few levels; hidden folders skipped).

    A command without a spec searches upward from the working folder, but outside a git
    repository a spec's state goes to the spec's own folder: from the folder above, the state is
    below. Naming it beats a bare "no runs yet"."""
    found: list[Path] = []
    todo, seen = [(folder, 0)], 0
    while todo and len(found) < most and seen < visits:
        here, level = todo.pop(0)
        seen += 1
        try:
            entries = sorted((e for e in os.scandir(here) if e.is_dir(follow_symlinks=False)), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name == STATE_DIR and level and (Path(entry.path) / DEFAULT_STATE.name).is_file():
                found.append(Path(entry.path) / DEFAULT_STATE.name)
            elif not entry.name.startswith(".") and level < depth and entry.name not in _NOT_PROJECTS:
                todo.append((Path(entry.path), level + 1))
    return found[:most]


_NOT_PROJECTS = {"node_modules", "__pycache__", "site-packages", "venv"}


def _absolute(location: str, base: Path) -> str:
    if is_postgres(location):
        return location
    path = Path(location).expanduser()
    return str(path if path.is_absolute() else (base / path).resolve())
