"""Outputs never overwrite a file batchor did not write, unless told to (`--force`).

A spec names its output path, and a spec may come from someone else: `output.path: ../notes.md`
must not silently replace a file. So every output file batchor writes for a spec is recorded
beside the state (`outputs-written.json` in the state's folder; `~/.batchor/` for a PostgreSQL
state), and a spec's output may replace an existing file only when batchor wrote it before, or
with `force`. A path given on the command line (`--output`, `export -o`) is the user's own choice
and is not checked.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from batchor.errors import OutputExistsError
from batchor.file_modes import PRIVATE_FILE, private_dir

RECORD = "outputs-written.json"


def record_path(state_location: str | None) -> Path:
    if not state_location or "://" in state_location:
        return Path.home() / ".batchor" / RECORD
    return Path(state_location).parent / RECORD


def check_not_foreign(target: Path, state_location: str | None, force: bool) -> None:
    """Refuse to replace an existing file batchor did not write (see module doc)."""
    if force or not target.exists() or str(target.resolve()) in _written(record_path(state_location)):
        return
    raise OutputExistsError(
        f"output {target} exists and batchor did not write it: the spec's output would replace it",
        hint="pass --force to replace it (force=True in Python), move it away, or change output.path",
    )


def remember(target: Path, state_location: str | None) -> None:
    """Record that batchor wrote `target` (atomically; a failure to record never fails the run)."""
    path = record_path(state_location)
    written = _written(path)
    if str(target.resolve()) in written:
        return
    try:
        private_dir(path.parent)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{RECORD}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(sorted(written | {str(target.resolve())}), handle, indent=0)
        os.chmod(tmp, PRIVATE_FILE)
        os.replace(tmp, path)
    except OSError:
        pass  # the next write asks for --force: safe, if less convenient


def _written(path: Path) -> set[str]:
    """The recorded paths; a record others can write or read (one checked out of a repository is
    never owner-only) counts for nothing."""
    try:
        if path.stat().st_mode & 0o077:
            return set()
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    return {str(p) for p in data} if isinstance(data, list) else set()
