"""Shrink a DuckDB state file after `prune`: DuckDB reuses freed blocks but never gives them
back to the file system, so the file keeps its size until it is rewritten.

The rewrite cannot lose data: every table is copied into a new file beside the old one, the
copy is checked table by table (row counts and the schema version), and only then does an atomic
rename replace the old file. A crash at any point leaves the old file whole. It runs under the
apply lock, so it refuses while an apply holds the state.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from batchor.duck import duckdb, memory_db
from batchor.errors import StateError
from batchor.state.lock import ApplyLock


def compact_duckdb(path: Path, before: int | None = None) -> dict[str, int]:
    """Rewrite the state file compactly; sizes (`before`: measured by the caller, say ahead of a
    prune that grew the file) and bytes freed."""
    before = state_bytes(path) if before is None else before
    tmp = path.with_name(f".{path.name}.compact.tmp")
    with ApplyLock(Path(str(path) + ".lock")):
        _remove(tmp)
        try:
            _copy_and_verify(path, tmp)
            os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))  # owner-only stays owner-only
            _fsync(tmp)
            os.replace(tmp, path)
            _fsync(path.parent)
        finally:
            _remove(tmp)
    return {"bytes_before": before, "bytes_after": state_bytes(path), "bytes_freed": max(0, before - state_bytes(path))}


def _copy_and_verify(source: Path, target: Path) -> None:
    db = memory_db()
    try:
        db.execute(f"ATTACH '{_quoted(source)}' AS old (READ_ONLY)")
        db.execute(f"ATTACH '{_quoted(target)}' AS new")
        db.execute("COPY FROM DATABASE old TO new")
        for table in _tables(db, "old"):
            (was,) = db.execute(f'SELECT count(*) FROM old.main."{table}"').fetchone()  # type: ignore[misc]
            (now,) = db.execute(f'SELECT count(*) FROM new.main."{table}"').fetchone()  # type: ignore[misc]
            if was != now:
                raise StateError(
                    f"compacting {source}: table {table} has {now} rows in the copy, not {was}; "
                    "the state file was left as it was"
                )
        if _tables(db, "old") != _tables(db, "new"):
            raise StateError(f"compacting {source}: the copy lacks tables; the state file was left as it was")
        db.execute("DETACH new")
    finally:
        db.close()


def _tables(db: duckdb.DuckDBPyConnection, catalog: str) -> list[str]:
    rows = db.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_catalog = ? ORDER BY table_name", [catalog]
    ).fetchall()
    return [r[0] for r in rows]


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")


def state_bytes(path: Path) -> int:
    """The state file's size with its write-ahead log."""
    wal = Path(str(path) + ".wal")
    return (path.stat().st_size if path.exists() else 0) + (wal.stat().st_size if wal.exists() else 0)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: Path) -> None:
    for leftover in (path, Path(str(path) + ".wal")):
        if leftover.exists():
            leftover.unlink()
