"""Which DuckDB state files this process already found current and whole.

Opening a state checks it: its schema version (migrating it if older) and its length (a truncated
file is reported at once). That is an attach and a checkpoint of the file, ~5 ms of CPU, and an
apply opens its state twice (plan, then run), a notebook at every call. A file this process
checked and nobody changed since is not checked again: any write, replacement, truncation or
restore from a backup changes its identity (device, inode, size, modification time), and a file
with a WAL beside it (blocks not in the file yet) is always checked.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

_CHECKED: dict[str, tuple[int, ...]] = {}
_LOCK = threading.Lock()


def checked_before(path: Path) -> bool:
    """Whether `path` is, as it is now, a file this process found current and whole."""
    identity = _identity(path)
    with _LOCK:
        return identity is not None and _CHECKED.get(str(path)) == identity


def remember_checked(path: Path) -> None:
    """Call right after `path` was found current and whole (and before writing to it)."""
    identity = _identity(path)
    with _LOCK:
        if identity is None:
            _CHECKED.pop(str(path), None)
        else:
            _CHECKED[str(path)] = identity


def _identity(path: Path) -> tuple[int, ...] | None:
    """None when the file is missing or a WAL lies beside it."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    if os.path.exists(f"{path}.wal"):
        return None
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
