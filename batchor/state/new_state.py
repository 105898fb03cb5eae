"""New DuckDB state files written as a copy of a new, migrated one.

Making a state file runs every schema migration (~20 DDL statements, ~22 ms of CPU). A process
that makes several (a notebook, a script over many folders, the test suite) keeps the bytes of
one new state (~0.8 MB, made in a private temporary folder) and writes each further new file from
them (~1 ms). The first new file of a process is migrated in place: a command makes one at most.
The copy appears under its name at once and never over an existing file (a hard link from a
temporary name), so a process creating the same state meanwhile makes it its own way.
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

_TEMPLATE: list[bytes] = []
_MADE = [0]  # new files this process made
_LOCK = threading.RLock()
_BUILDING = threading.local()


def made_from_template(path: Path) -> bool:
    """Write the missing state file `path` as a copy of a new state; False when this process has
    no template yet (its first new file), is making it, or another process made `path` meanwhile."""
    with _LOCK:
        if getattr(_BUILDING, "active", False):
            return False
        _MADE[0] += 1
        if _MADE[0] == 1:
            return False
        if not _TEMPLATE:
            _TEMPLATE.append(_new_state_bytes())
        data = _TEMPLATE[0]
    return _written_once(path, data)


def _new_state_bytes() -> bytes:
    from batchor.state.duckdb_store import DuckDBStore

    _BUILDING.active = True
    try:
        with tempfile.TemporaryDirectory(prefix="batchor-new-state-") as folder:
            made = Path(folder) / "state.duckdb"
            DuckDBStore(made).close()
            return made.read_bytes()
    finally:
        _BUILDING.active = False


def _written_once(path: Path, data: bytes) -> bool:
    """`data` at `path` unless something is there (or the file system refuses hard links)."""
    if path.exists() or Path(f"{path}.wal").exists():
        return False
    temporary = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.new")
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        os.link(temporary, path)
        return True
    except OSError:  # made meanwhile (FileExistsError), or no hard links here: made by migrating
        return False
    finally:
        temporary.unlink(missing_ok=True)
