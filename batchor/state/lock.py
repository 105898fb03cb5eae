"""Exclusive apply: an advisory lock file beside the state, held for a whole apply.

DuckDB's own file lock only lasts while a connection is open (we keep connections short), so a
second apply is refused by this lock instead, with a message naming the holder.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path

from batchor.errors import StateLockedError
from batchor.private import private_dir


class ApplyLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> "ApplyLock":
        private_dir(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise StateLockedError(
                f"another batchor apply is running on this state ({holder})",
                hint="wait for it to finish, stop it, or use another --state",
            ) from None
        os.ftruncate(fd, 0)
        info = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%dT%H:%M:%S")}
        os.write(fd, json.dumps(info).encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "ApplyLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {info.get('pid')} on {info.get('host')} since {info.get('since')}"
    except (OSError, ValueError):
        return "holder unknown"
