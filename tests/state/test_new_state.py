"""New DuckDB state files after a process's first are written from a copy of a new, migrated one:
each is a whole, empty, owner-only state of the current schema, independent of the others, and a
file that exists is never written over."""

from __future__ import annotations

import stat

import duckdb

from batchor.state import DuckDBStore, duckdb_file, new_state
from batchor.state.migrations import MIGRATIONS, SCHEMA_VERSION

SCHEMA_QUERY = (
    "SELECT table_name, column_name, data_type, column_index FROM duckdb_columns() "
    "WHERE database_name = current_database() ORDER BY 1, 4"
)
KEYS_QUERY = (
    "SELECT table_name, constraint_type, constraint_text FROM duckdb_constraints() "
    "WHERE database_name = current_database() ORDER BY ALL"
)


def _migrated_in_place(path) -> tuple[list, list]:
    db = duckdb.connect(str(path))
    db.execute("CREATE TABLE batchor_meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    for _, statements in MIGRATIONS:
        for sql in statements:
            db.execute(sql)
    found = db.execute(SCHEMA_QUERY).fetchall(), db.execute(KEYS_QUERY).fetchall()
    db.close()
    return found


def test_new_states_are_whole_empty_and_independent_copies(tmp_path):
    DuckDBStore(tmp_path / "first.duckdb").close()  # a process's first may be migrated in place
    DuckDBStore(tmp_path / "second.duckdb").close()  # from here on the template exists
    first_alias = next(duckdb_file._HOST.aliases)
    one = DuckDBStore(tmp_path / "one.duckdb")
    assert next(duckdb_file._HOST.aliases) == first_alias + 1  # made without attaching it
    one.execute("INSERT INTO runs (run_id) VALUES ('r1')")
    two = DuckDBStore(tmp_path / "two.duckdb")
    assert one.execute("SELECT run_id FROM runs") == [("r1",)] and two.execute("SELECT count(*) FROM runs") == [(0,)]
    assert two.execute("SELECT value FROM batchor_meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
    assert stat.S_IMODE((tmp_path / "two.duckdb").stat().st_mode) == 0o600
    assert (two.execute(SCHEMA_QUERY), two.execute(KEYS_QUERY)) == _migrated_in_place(tmp_path / "direct2.duckdb")
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".new")]  # no temporary left


def test_a_file_made_meanwhile_is_never_written_over(tmp_path):
    path = tmp_path / "state.duckdb"
    path.write_bytes(b"made by another process")
    assert not new_state._written_once(path, b"template bytes")
    assert path.read_bytes() == b"made by another process"
