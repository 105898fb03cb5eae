"""Opening a DuckDB state checks its schema version and length once per file as it is: a file this
process checked and nobody changed is opened without attaching it; a changed, replaced, truncated
or older file is checked (and migrated or refused) again."""

from __future__ import annotations

import shutil

import duckdb
import pytest

from batchor.errors import StateCorruptError
from batchor.state import DuckDBStore, duckdb_file
from batchor.state.migrations import MIGRATIONS, SCHEMA_VERSION


def _attaches(action) -> int:
    before = next(duckdb_file._HOST.aliases)
    action()
    return next(duckdb_file._HOST.aliases) - before - 1


def test_a_checked_unchanged_file_opens_without_attaching_and_a_written_one_is_checked(tmp_path):
    path = tmp_path / "state.duckdb"
    DuckDBStore(path).close()
    assert _attaches(lambda: DuckDBStore(path)) == 0
    DuckDBStore(path).execute("INSERT INTO batchor_meta VALUES ('note', 'x')")  # a write: the file changed
    assert _attaches(lambda: DuckDBStore(path)) == 1
    assert _attaches(lambda: DuckDBStore(path)) == 0


def test_a_file_replaced_by_an_older_one_is_migrated_on_the_next_open(tmp_path):
    path, old = tmp_path / "state.duckdb", tmp_path / "old.duckdb"
    DuckDBStore(path).close()
    db = duckdb.connect(str(old))
    db.execute("CREATE TABLE batchor_meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    for sql in MIGRATIONS[0][1]:
        db.execute(sql)
    db.execute("INSERT INTO batchor_meta VALUES ('schema_version', '1')")
    db.close()
    shutil.copyfile(old, path)  # e.g. restored from a backup
    store = DuckDBStore(path)
    assert store.execute("SELECT value FROM batchor_meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]


def test_a_checked_file_truncated_later_is_reported_on_the_next_open(tmp_path):
    path = tmp_path / "state.duckdb"
    DuckDBStore(path).close()
    DuckDBStore(path).close()  # checked and remembered
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(StateCorruptError, match="truncated|damaged"):
        DuckDBStore(path)
