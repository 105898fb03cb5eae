"""How a DuckDB state file is attached: to the process's one in-memory DuckDB (`_Host`), for a
unit of work, or kept a while across a series of units (an apply's flushes).

DuckDB admits one process per database file, so connections are short: each named transition
attaches the file, commits and detaches it, which lets `batchor status` or `plan` read between an
apply's flushes. The host is kept open while units come often: opening a DuckDB instance costs
~10 ms (it builds the function catalog), attaching ~1 ms, and detaching checkpoints the file.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from batchor.duck import duckdb, memory_db
from batchor.errors import StateCorruptError, StateError, StateLockedError, StateVersionError

_FREE_AFTER_KEEP_S = 0.5  # after a kept file is detached, how long it is attached only per unit
_PROCESS_LOCK = threading.RLock()  # one unit of work at a time per process: they share the host


class _Host:
    """The process's in-memory DuckDB that state files are attached to (see the module doc).

    It stays open while small units of work follow each other closely (an apply's flushes, several
    a second) and is closed otherwise: a DuckDB instance gives the memory its queries used back to
    the system only when it closes (hundreds of MB after a million-row join). A unit is small by the
    CPU the process used meanwhile, not its wall time: on a busy machine a flush can take 0.3 s of wall time, and
    reopening the instance for every flush (~10 ms of CPU, 80 ms under load) then slows the run."""

    SMALL_UNIT_CPU_S = 0.5
    CLOSE_AFTER_GAP_S = 1.0

    def __init__(self) -> None:
        self.db: duckdb.DuckDBPyConnection | None = None
        self.attached = 0  # state files attached right now
        self.last_end = 0.0
        self.aliases = itertools.count()
        self.kept: AttachedFile | None = None  # the file that stays attached between its units
        self.units = 0  # units of work this process ran on state files (a query or a transaction each)

    def attach(self, path: Path) -> str:
        """Attach `path` under a new alias (DuckDB errors propagate: the store names them)."""
        if self.db is None:
            self.db = memory_db()
        alias, quoted = f"state_{next(self.aliases)}", str(path).replace("'", "''")
        self.db.execute(f"ATTACH '{quoted}' AS {alias}")
        self.attached += 1
        return alias

    def cursor(self, alias: str) -> duckdb.DuckDBPyConnection:
        assert self.db is not None
        db = self.db.cursor()
        db.execute(f"USE {alias}")
        return db

    def detach(self, alias: str, since: float, cpu_used: float) -> None:
        """Detach (DuckDB checkpoints the file then); close the host unless small units come often.
        `since` is the last unit's start (monotonic), `cpu_used` the most process CPU any unit used
        while the file was attached (all threads: DuckDB runs a big query on its own; the event
        loop's share during a flush stays well below the bound)."""
        assert self.db is not None
        try:
            self.db.execute(f"DETACH {alias}")
        except duckdb.Error:
            self.attached -= 1
            self._close_if_idle()  # closing the host lets the file go all the same
            raise
        self.attached -= 1
        now = time.monotonic()
        small = cpu_used < self.SMALL_UNIT_CPU_S
        busy = small and since - self.last_end < self.CLOSE_AFTER_GAP_S
        self.last_end = now
        if not busy:
            self._close_if_idle()

    def _close_if_idle(self) -> None:
        if self.attached == 0 and self.db is not None:
            self.db.close()
            self.db = None


_HOST = _Host()


class AttachedFile:
    """One state file's attachment to the host: made for a unit of work (nested units share it),
    kept a while between units inside `kept()`, and detached so other processes can open it."""

    def __init__(self, path: Path, connect_timeout_s: float) -> None:
        self.path, self.connect_timeout_s = path, connect_timeout_s
        self.held: duckdb.DuckDBPyConnection | None = None
        self.alias = ""
        self._units = 0  # open units: the file stays attached until the last ends
        self._keepers, self._keep_s = 0, 0.0  # see kept
        self._release_timer: threading.Timer | None = None
        self._attached_at, self._freed_at = 0.0, -_FREE_AFTER_KEEP_S
        self._unit_at, self._unit_cpu, self._heaviest_unit_cpu = 0.0, 0.0, 0.0

    @contextmanager
    def unit(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The file attached (a cursor of the host) for one unit of work, or for a series when
        units are nested. One unit at a time per process: they share the host instance."""
        with _PROCESS_LOCK:
            if self.held is None:
                self.held = self._connect()
            if not self._units:
                self._unit_at, self._unit_cpu = time.monotonic(), time.process_time()
            self._units += 1
            _HOST.units += 1
            try:
                yield self.held
            except BaseException:
                self._units -= 1
                if not self._units:
                    self._unit_ended()
                    self.release()  # closing the cursor rolls back what the error left open
                raise
            self._units -= 1
            if not self._units:
                self._unit_ended()
                self._after_last_unit()

    @contextmanager
    def kept(self, seconds: float) -> Iterator[None]:
        """Within the block, the file stays attached up to `seconds` after it was attached, across
        units: a stream of small writes (an apply's flushes, four a second) then skips most
        attaches and the checkpoint DuckDB makes at each detach. Each write still commits (to the
        WAL) before it returns, so a crash loses nothing more. Other processes still get the file:
        after `seconds` it is detached, and for the next `_FREE_AFTER_KEEP_S` each unit detaches it
        again as it ends, as outside the block."""
        with _PROCESS_LOCK:
            self._keepers, self._keep_s = self._keepers + 1, seconds
        try:
            yield
        except BaseException:
            self._stop_keeping(quiet=True)  # the error that ended the block is the one to report
            raise
        self._stop_keeping()

    def _stop_keeping(self, quiet: bool = False) -> None:
        with _PROCESS_LOCK:
            self._keepers -= 1
            if not self._keepers and not self._units:
                try:
                    self.release()
                except (duckdb.Error, StateError):  # e.g. the checkpoint of a full disk
                    if not quiet:
                        raise

    def release(self) -> None:
        """Detach the file, so other processes can open it."""
        with _PROCESS_LOCK:
            db, self.held = self.held, None
            timer, self._release_timer = self._release_timer, None
            if timer is not None:
                timer.cancel()
            if _HOST.kept is self:
                _HOST.kept = None
                self._freed_at = time.monotonic()
            if db is not None:
                db.close()  # rolls back a transaction an error left open
                cpu_used, self._heaviest_unit_cpu = self._heaviest_unit_cpu, 0.0
                _HOST.detach(self.alias, self._unit_at, cpu_used)

    def _unit_ended(self) -> None:
        self._heaviest_unit_cpu = max(self._heaviest_unit_cpu, time.process_time() - self._unit_cpu)

    def _after_last_unit(self) -> None:
        """Detach the file, or keep it attached a while longer (see kept)."""
        now = time.monotonic()
        fresh = self._attached_at - self._freed_at >= _FREE_AFTER_KEEP_S  # others had their turn
        if self._keepers and fresh and now - self._attached_at < self._keep_s:
            _HOST.last_end = now  # in use: the host stays open (see _Host.detach)
            self._release_later(self._attached_at + self._keep_s - now)
        else:
            self.release()

    def _release_later(self, delay: float) -> None:
        """Detach the file after `delay` (a unit running then holds the lock: it goes first)."""
        _HOST.kept = self
        if self._release_timer is not None:
            return
        attached_at = self._attached_at

        def release() -> None:
            with _PROCESS_LOCK:
                if self.held is None or self._attached_at != attached_at:
                    return
                try:
                    self.release()
                except (duckdb.Error, StateError):
                    pass  # every write committed: the next unit attaches the file again and reports it

        self._release_timer = threading.Timer(delay, release)
        self._release_timer.daemon = True
        self._release_timer.start()

    def _connect(self) -> duckdb.DuckDBPyConnection:
        """A cursor of the host with the state file attached and selected, waiting while
        another process holds the file."""
        if _HOST.kept is not None and _HOST.kept is not self:
            _HOST.kept.release()  # another store of this process kept its file attached
        deadline = time.monotonic() + self.connect_timeout_s
        delay = 0.005
        while True:
            try:
                self.alias = _HOST.attach(self.path)
                break
            except duckdb.IOException as exc:
                text = str(exc)
                if "lock" not in text.lower():
                    raise open_error(self.path, text) from None
                if time.monotonic() > deadline:
                    raise StateLockedError(
                        f"state {self.path} is held by another process", hint="wait for it to finish"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
            except duckdb.Error as exc:
                raise open_error(self.path, str(exc)) from None
        self._attached_at = time.monotonic()
        return _HOST.cursor(self.alias)


_CORRUPTION_TEXT = ("not a valid duckdb", "corrupt", "checksum", "could not read enough bytes", "magic")


def is_corruption(text: str) -> bool:
    lowered = text.lower()
    return any(t in lowered for t in _CORRUPTION_TEXT)


def corrupt_state(path: Path, detail: str) -> StateCorruptError:
    return StateCorruptError(
        f"state {path} is damaged and cannot be read: {detail.splitlines()[0][:200]}",
        hint=f"restore {path} from a backup, or move it aside and point --state at a new file (answers "
        "stored only in it will be asked again); `batchor state check` scans a state for damage",
    )


def open_error(path: Path, text: str) -> StateError:
    lowered = text.lower()
    if is_corruption(text):
        return corrupt_state(path, text)
    if "version" in lowered:
        return StateVersionError(
            f"state {path} was written by a newer DuckDB/batchor: {text[:200]}", hint="upgrade batchor"
        )
    return StateError(f"cannot open state {path}: {text[:200]}")
