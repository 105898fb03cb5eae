"""Exclusive apply: an advisory lock file beside the state, held for a whole apply.

DuckDB's own file lock only lasts while a connection is open (we keep connections short), so a
second apply is refused by this lock instead, with a message naming the holder. The lock is taken
through `portalocker` (flock on POSIX, LockFileEx/msvcrt on Windows), imported only when a lock is
taken, so `import batchor` works where `fcntl` does not exist.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import IO

from batchor.errors import StateLockedError
from batchor.file_modes import private_dir


class ApplyLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[bytes] | None = None

    def acquire(self) -> ApplyLock:
        import portalocker

        private_dir(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        handle = os.fdopen(fd, "r+b", buffering=0)
        try:
            _lock_soon(handle)
        except portalocker.LockException:
            holder = _read_holder(handle)
            handle.close()
            raise StateLockedError(
                f"another batchor apply is running on this state ({holder})",
                hint="wait for it to finish, stop it, or use another --state",
            ) from None
        info = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%dT%H:%M:%S")}
        handle.truncate(0)
        handle.write(json.dumps(info).encode())
        self._file = handle
        return self

    def release(self) -> None:
        if self._file is not None:
            import portalocker

            portalocker.unlock(self._file)
            self._file.close()
            self._file = None

    def __enter__(self) -> ApplyLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _lock_soon(handle: IO[bytes], tries: int = 5) -> None:
    """Take the lock, trying again for a moment: `status` may be probing it (`lock_is_held`)."""
    import portalocker

    for attempt in range(tries):
        try:
            portalocker.lock(handle, portalocker.LOCK_EX | portalocker.LOCK_NB)
            return
        except portalocker.LockException:
            if attempt == tries - 1:
                raise
            time.sleep(0.05)


def _read_holder(handle: IO[bytes]) -> str:
    """Who holds the lock, from what it wrote (Windows may refuse the read: the bytes are locked)."""
    try:
        handle.seek(0)
        info = json.loads(handle.read(4096) or b"{}")
        return f"pid {info.get('pid')} on {info.get('host')} since {info.get('since')}"
    except (OSError, ValueError):
        return "holder unknown"


def lock_is_held(path: Path) -> bool:
    """Whether some process (this one included) holds the apply lock at `path` right now.

    Probed with a shared lock taken and dropped at once; `acquire` retries for a moment, so a
    probe never makes a starting apply fail."""
    import portalocker

    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError:
        return False  # no lock file: no apply ever ran here
    try:
        portalocker.lock(handle, portalocker.LOCK_SH | portalocker.LOCK_NB)
    except portalocker.LockException:
        return True
    finally:
        handle.close()  # closing drops the probe's shared lock
    return False
