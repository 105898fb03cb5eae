"""In-memory DuckDB connections: one process-wide instance shared for small work, own ones for big.

Opening a DuckDB instance costs ~35 ms of CPU (it builds the function catalog); a cursor of an
open one ~0.3 ms, and a small apply needs half a dozen. So small work (a few thousand rows, a
few MB) takes a cursor of one shared in-memory instance (`shared_db`): registered Arrow objects
and TEMP views and tables are the cursor's own and go with it. Big work takes an instance of its
own (`memory_db`), closed after use: an instance gives the memory its queries used back to the
system only when it closes (hundreds of MB after a million-row aggregate), so the shared one must
only ever see small work. Users of the shared instance never change its global settings
(threads, memory_limit, preserve_insertion_order) and detach what they attach (`attached`).

DuckDB draws a progress bar on stdout for any query running over two seconds (a big input, a
busy machine), which would corrupt `--json` output and the plan text; every connection batchor
opens comes from here so none does.

Spec SQL (input.sql, SQL steps, checks) is data from a spec file that may come from a pull
request: it runs only in a `confined_db`, an instance with file access limited to the project's
folder and declared files, extensions neither installed nor loaded, and its configuration locked
so a query cannot undo that (see docs/explanation/trust-model.md).

Every module that uses DuckDB imports it from here (`from batchor.duck import duckdb`): the first
import runs DuckDB's C++ init, which a Ctrl+C would abort (see batchor/sigint.py), so it runs
with the Ctrl+C held back until it is done.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from batchor.sigint import ctrl_c_deferred

with ctrl_c_deferred():
    import duckdb as duckdb  # re-exported: the one place DuckDB is first imported

SMALL_ROWS = 5_000  # row counts up to this go to the shared instance
SMALL_BYTES = 8 << 20  # input files up to this size, in total

_LOCK = threading.Lock()
_SHARED: list[duckdb.DuckDBPyConnection] = []  # the instance's root connection, never queried
_ALIASES = itertools.count()
_CONFINED: OrderedDict[tuple, duckdb.DuckDBPyConnection] = OrderedDict()  # small confined instances
_CONFINED_KEPT = 8


def memory_db() -> duckdb.DuckDBPyConnection:
    """A new in-memory instance of its own: for big work, closed by the caller after use."""
    db = duckdb.connect(":memory:")
    db.execute("SET enable_progress_bar = false")
    return db


def shared_cursor() -> duckdb.DuckDBPyConnection:
    """A new connection (cursor) to the process's shared in-memory instance, for one user in one
    thread at a time; the caller closes it. Its TEMP objects and registrations are its own."""
    with _LOCK:
        if not _SHARED:
            _SHARED.append(memory_db())
        cursor = _SHARED[0].cursor()
    cursor.execute("SET enable_progress_bar = false")  # a per-connection setting
    return cursor


@contextmanager
def shared_db() -> Iterator[duckdb.DuckDBPyConnection]:
    """`shared_cursor()` closed after the block."""
    cursor = shared_cursor()
    try:
        yield cursor
    finally:
        cursor.close()


@contextmanager
def scratch_db(small: bool) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection for one piece of work, closed after it: a shared cursor when `small`, else an
    instance of its own (whose memory goes back to the system when it closes)."""
    db = shared_cursor() if small else memory_db()
    try:
        yield db
    finally:
        db.close()


def confined_db(
    folders: Iterable[Path] = (),
    files: Iterable[str] = (),
    *,
    search_path: Path | None = None,
    small: bool = True,
    one_thread: bool = False,
) -> duckdb.DuckDBPyConnection:
    """A connection for spec SQL, closed by the caller: reads only files under `folders` (symlinks
    resolved by DuckDB) and the exact `files` (absolute, or relative to `search_path`), no network,
    no extension installed or loaded, configuration locked. Small work takes a cursor of a kept
    instance with the same powers; big work (or `one_thread`) an instance of its own."""
    key = (
        tuple(sorted(str(f).rstrip("/") + "/" for f in folders)),
        tuple(sorted(set(files))),
        str(search_path or ""),
        one_thread,
    )
    if not small or one_thread:
        return _confined_instance(key)
    with _LOCK:
        root = _CONFINED.pop(key, None) or _confined_instance(key)
        _CONFINED[key] = root  # most recently used last
        while len(_CONFINED) > _CONFINED_KEPT:
            _CONFINED.popitem(last=False)[1].close()
        return root.cursor()


def _confined_instance(key: tuple) -> duckdb.DuckDBPyConnection:
    folders, files, search_path, one_thread = key
    config: dict[str, str | bool | int | float | list[str]] = {
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
        "allow_community_extensions": False,
        **({"threads": 1} if one_thread else {}),
    }
    db = duckdb.connect(":memory:", config=config)
    db.execute("SET enable_progress_bar = false")
    db.execute("SET allowed_directories = ?", [list(folders)])
    db.execute("SET allowed_paths = ?", [list(files)])
    if search_path:
        db.execute("SET GLOBAL file_search_path = ?", [search_path])
    db.execute("SET enable_external_access = false")
    db.execute("SET lock_configuration = true")
    return db


@contextmanager
def attached(db: duckdb.DuckDBPyConnection, path: str, *, read_only: bool = False) -> Iterator[str]:
    """Attach the database file `path` under an alias unique in the process and detach it after
    the block, even when it fails: attached databases belong to the whole instance."""
    alias = f"file_{next(_ALIASES)}"
    quoted = path.replace("'", "''")
    db.execute(f"ATTACH '{quoted}' AS {alias}" + (" (READ_ONLY)" if read_only else ""))
    try:
        yield alias
    finally:
        db.execute(f"DETACH {alias}")


@contextmanager
def one_thread(db: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """The block's queries on one thread (an instance-wide setting, put back after). For a big
    read whose result is the point, such as the export's parts of a job's results: a second
    thread buys little time there but holds its own buffers (1M-row all-cached re-apply on two
    cores: ~430 MB peak RSS with two threads, ~360 MB with one)."""
    (threads,) = db.execute("SELECT current_setting('threads')").fetchone()  # type: ignore[misc]
    db.execute("SET threads = 1")
    try:
        yield
    finally:
        db.execute(f"SET threads = {int(threads)}")
