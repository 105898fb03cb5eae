"""The process-wide in-memory DuckDB (batchor/duck.py): users sharing it through cursors never see
each other's views, registrations or attached files, and a failure leaves nothing behind."""

from __future__ import annotations

import threading
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

import batchor
from batchor.duck import attached, shared_cursor, shared_db
from batchor.frames import read_output
from batchor.spec.inputs import InputReader, resolve_input

DEFAULT_DATABASES = {"memory", "system", "temp"}


def _databases() -> set[str]:
    with shared_db() as db:
        return {r[0] for r in db.execute("SELECT database_name FROM duckdb_databases()").fetchall()}


def _shared_objects() -> list[tuple[str, str]]:
    """Views and tables any user of the shared instance could see (TEMP ones are per cursor)."""
    with shared_db() as db:
        return db.execute(
            "SELECT schema_name, view_name FROM duckdb_views() WHERE NOT internal UNION ALL "
            "SELECT schema_name, table_name FROM duckdb_tables()"
        ).fetchall()


def _in_threads(work, count: int = 2) -> list:
    """Run `work(i, barrier)` in `count` threads at once; their results, re-raising any error."""
    barrier, results, errors = threading.Barrier(count, timeout=10), [None] * count, []

    def run(i: int) -> None:
        try:
            results[i] = work(i, barrier)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    if errors:
        raise errors[0]
    return results


def test_concurrent_users_with_the_same_names_see_only_their_own_objects():
    def work(i: int, barrier: threading.Barrier) -> tuple[list, list]:
        with shared_db() as db:
            db.register("rows", pa.table({"n": [i, i]}))
            db.execute(f"CREATE TEMP VIEW input AS SELECT {i} AS n")
            db.execute("CREATE TEMP TABLE source AS SELECT n * 10 AS n FROM rows")
            barrier.wait()  # both users hold all three names now
            seen = (
                db.execute("SELECT n FROM input UNION ALL SELECT n FROM rows").fetchall(),
                db.execute("SELECT n FROM source").fetchall(),
            )
            barrier.wait()
            return seen

    first, second = _in_threads(work)
    assert first == ([(0,), (0,), (0,)], [(0,), (0,)])
    assert second == ([(1,), (1,), (1,)], [(10,), (10,)])
    assert _shared_objects() == []  # closing a cursor drops its temp objects


def test_a_cursor_does_not_change_settings_for_others():
    with shared_db() as first, shared_db() as second:
        first.execute("SET enable_progress_bar = true")
        first.execute("SET file_search_path = '/tmp'")
        assert second.execute(
            "SELECT current_setting('enable_progress_bar'), current_setting('file_search_path')"
        ).fetchall() == [(False, "")]


def test_attached_files_get_unique_aliases_and_are_detached_after_a_failure(tmp_path):
    def work(i: int, barrier: threading.Barrier) -> str:
        with shared_db() as db, attached(db, str(tmp_path / f"f{i}.duckdb")) as alias:
            db.execute(f"CREATE TABLE {alias}.results AS SELECT {i} AS n")
            barrier.wait()  # both files attached at once
            return alias

    first, second = _in_threads(work)
    assert first != second
    db = shared_cursor()
    try:
        with pytest.raises(duckdb.Error), attached(db, str(tmp_path / "f0.duckdb"), read_only=True) as alias:
            db.execute(f"INSERT INTO {alias}.results VALUES (5)")  # read-only: fails inside the block
    finally:
        db.close()
    assert _databases() == DEFAULT_DATABASES
    with shared_db() as db, attached(db, str(tmp_path / "f1.duckdb"), read_only=True) as alias:
        assert db.execute(f"SELECT n FROM {alias}.results").fetchall() == [(1,)]


def _csv(folder: Path, name: str, texts: list[str]) -> Path:
    path = folder / name
    path.write_text("id,text\n" + "".join(f"{i},{t}\n" for i, t in enumerate(texts)), encoding="utf-8")
    return path


def test_two_small_input_readers_in_threads_read_their_own_file(tmp_path):
    files = [_csv(tmp_path, "a.csv", ["a1", "a2", "a3"]), _csv(tmp_path, "b.csv", ["b1", "b2"])]

    def work(i: int, barrier: threading.Barrier) -> list[str]:
        reader = InputReader(
            resolve_input(str(files[i]), tmp_path, None, "SELECT * FROM input ORDER BY id", None, ["id"])
        )
        try:
            assert reader.small  # served by the shared instance
            barrier.wait()  # both readers' `input` and `source` views exist now
            return [row["text"] for batch in reader.batches() for row in batch.to_pylist()]
        finally:
            reader.close()

    assert _in_threads(work) == [["a1", "a2", "a3"], ["b1", "b2"]]
    assert _shared_objects() == []


def test_a_failing_input_query_leaves_nothing_in_the_shared_instance(tmp_path):
    path = _csv(tmp_path, "a.csv", ["x"])
    with pytest.raises(batchor.BatchorError):
        InputReader(resolve_input(str(path), tmp_path, None, "SELECT missing FROM input", None, []))
    assert _shared_objects() == [] and _databases() == DEFAULT_DATABASES


def test_a_small_apply_with_a_duckdb_output_leaves_the_shared_instance_clean(workdir):
    (workdir / "teams.csv").write_text("text,team\np,red\nq,blue\n", encoding="utf-8")
    route = {"sql": "SELECT _row_key, t.team FROM rows JOIN 'teams.csv' t USING (text)"}  # relative to the spec
    spec = {
        "name": "shared",
        "input": {"path": str(_csv(workdir, "in.csv", ["p", "q"])), "key": "id"},
        "model": {"provider": "mock", "name": "m"},
        "output": {"path": "out.duckdb"},
        "steps": {"route": route, "echo": {"prompt": "Say {{ row.text }} to {{ route.team }}"}},
        "checks": [{"name": "said", "sql": "length(echo) > 0"}],
    }
    result = batchor.apply(spec)
    assert result.succeeded == 2 and result.checks.passed
    assert sorted(result.data["route.team"].to_pylist()) == ["blue", "red"]
    assert read_output(result.output_path).num_rows == 2
    assert _shared_objects() == [] and _databases() == DEFAULT_DATABASES
    with shared_db() as db:
        assert db.execute(
            "SELECT current_setting('threads') > 0, current_setting('preserve_insertion_order')"
        ).fetchall() == [(True, True)]
