"""DuckDB draws a progress bar on stdout for queries over two seconds (the default: enabled);
batchor's connections have it off, so `--json` output and plan text stay clean on big inputs and
busy machines (a 1M-row plan or a loaded CI runner printed one into `plan --json`)."""

from __future__ import annotations

from batchor.duck import memory_db
from batchor.state import DuckDBStore

SETTING = "SELECT current_setting('enable_progress_bar')"


def test_memory_connections_draw_no_progress_bar():
    assert memory_db().sql(SETTING).fetchall() == [(False,)]


def test_the_state_connection_draws_no_progress_bar(tmp_path):
    store = DuckDBStore(tmp_path / "state.duckdb")
    try:
        with store.connection() as db:
            assert db.execute(SETTING).fetchall() == [(False,)]
    finally:
        store.close()
