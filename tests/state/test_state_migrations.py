"""Schema migrations on real DuckDB files written by older versions: rows survive, and the new
write path keeps the uniqueness the dropped primary keys gave."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from batchor.state import DuckDBStore
from batchor.state.base import RESULT_SCHEMA
from batchor.state.migrations import MIGRATIONS, SCHEMA_VERSION


def _version_2_state(path) -> None:
    """A state as batchor wrote it at schema version 2 (primary keys on results and job_requests)."""
    db = duckdb.connect(str(path))
    db.execute("CREATE TABLE batchor_meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    for version, statements in MIGRATIONS:
        if version <= 2:
            for sql in statements:
                db.execute(sql)
    db.execute("INSERT INTO batchor_meta VALUES ('schema_version', '2')")
    db.execute(
        "INSERT INTO results VALUES ('k1', 's', 'succeeded', 'A', NULL, NULL, 1, 10, 5, 0.5, 'r1', now()), "
        "('k2', 's', 'failed', NULL, 'http_400', 'boom', 2, 0, 0, 0, 'r1', now())"
    )
    db.execute("INSERT INTO job_requests VALUES ('j', 's', '1', 'k1'), ('j', 's', '2', 'k2')")
    db.close()


def _results(*rows: tuple[str, str, str | None]) -> pa.Table:
    n = len(rows)
    return pa.table(
        {
            "request_key": [r[0] for r in rows],
            "step": ["s"] * n,
            "status": [r[1] for r in rows],
            "output": [r[2] for r in rows],
            "error_code": [None] * n,
            "error": [None] * n,
            "attempts": [1] * n,
            "input_tokens": [1] * n,
            "output_tokens": [1] * n,
            "cost_usd": [0.0] * n,
            "run_id": ["r2"] * n,
        },
        schema=RESULT_SCHEMA,
    )


def test_a_version_2_state_keeps_its_rows_and_loses_its_primary_keys(tmp_path):
    path = tmp_path / "v2.duckdb"
    _version_2_state(path)
    store = DuckDBStore(path)
    assert store.execute("SELECT value FROM batchor_meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
    assert store.execute("SELECT request_key, status, output, attempts FROM results ORDER BY 1") == [
        ("k1", "succeeded", "A", 1),
        ("k2", "failed", None, 2),
    ]
    assert store.execute("SELECT row_key, request_key FROM job_requests ORDER BY 1") == [("1", "k1"), ("2", "k2")]
    assert store.execute(
        "SELECT count(*) FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY' "
        "AND table_name IN ('results', 'job_requests')"
    ) == [(0,)]
    assert store.cached_keys(pa.array(["k1", "k2"])) == {"k1"}
    store.record_results(_results(("k2", "succeeded", "B")), None)  # a later answer still replaces
    assert store.execute("SELECT status, output FROM results WHERE request_key = 'k2'") == [("succeeded", "B")]
    store.close()


def test_a_key_twice_in_one_write_is_stored_once_first_wins(tmp_path):
    store = DuckDBStore(tmp_path / "s.duckdb")
    store.record_results(
        _results(("a", "succeeded", "first"), ("b", "failed", None), ("a", "succeeded", "second")), None
    )
    assert store.execute("SELECT request_key, output FROM results ORDER BY 1") == [("a", "first"), ("b", None)]
    store.add_run_requests("j", "s", pa.table({"row_key": ["1", "1", "2"], "request_key": ["x", "y", "z"]}))
    store.add_run_requests("j", "s", pa.table({"row_key": ["2"], "request_key": ["z2"]}))
    store.add_run_requests("j", "other", pa.table({"row_key": ["2"], "request_key": ["w"]}))
    assert store.execute("SELECT step, row_key, request_key FROM job_requests ORDER BY 1, 2") == [
        ("other", "2", "w"),
        ("s", "1", "x"),
        ("s", "2", "z2"),
    ]
    store.close()


def test_a_migration_that_fails_leaves_the_state_at_its_old_version_untouched(tmp_path):
    """The missing migrations run in one transaction: a failure in a later one (here 6, whose
    column this damaged file already has) also undoes the earlier ones (3-5)."""
    path = tmp_path / "v2.duckdb"
    _version_2_state(path)
    db = duckdb.connect(str(path))
    db.execute("ALTER TABLE attempts ADD COLUMN feedback VARCHAR")
    db.close()
    with pytest.raises(duckdb.CatalogException, match="feedback"):
        DuckDBStore(path)
    db = duckdb.connect(str(path), read_only=True)
    assert db.execute("SELECT value FROM batchor_meta WHERE key = 'schema_version'").fetchall() == [("2",)]
    assert "step" not in {c[0] for c in db.execute("DESCRIBE attempts").fetchall()}  # migration 5's column
    assert db.execute(
        "SELECT count(*) FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY' AND table_name = 'results'"
    ).fetchall() == [(1,)]  # migration 3 undone too
    db.close()
    assert not _attached_anywhere(path)


def _attached_anywhere(path) -> bool:
    from batchor.state.duckdb_file import _HOST

    return _HOST.db is not None and any(
        row[0] == str(path) for row in _HOST.db.execute("SELECT path FROM duckdb_databases()").fetchall()
    )
