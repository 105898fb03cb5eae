"""A DuckDB state is attached only for each unit of work, so another process (`batchor status`,
`plan`) reads it between an apply's flushes, while this process keeps writing."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from contextlib import nullcontext

import duckdb
import pyarrow as pa
import pytest

from batchor.state import DuckDBStore
from batchor.state.base import RESULT_SCHEMA

READER = """
import sys
from pathlib import Path
from batchor.state import DuckDBStore
store = DuckDBStore(Path(sys.argv[1]), connect_timeout_s=20)
print(store.execute("SELECT count(*) FROM results")[0][0])
"""


def _results(start: int, n: int) -> pa.Table:
    keys = [f"k{i}" for i in range(start, start + n)]
    return pa.table(
        {
            "request_key": keys,
            "step": ["s"] * n,
            "status": ["succeeded"] * n,
            "output": ["{}"] * n,
            "error_code": [None] * n,
            "error": [None] * n,
            "attempts": [1] * n,
            "input_tokens": [1] * n,
            "output_tokens": [1] * n,
            "cost_usd": [0.0] * n,
            "run_id": ["r1"] * n,
        },
        schema=RESULT_SCHEMA,
    )


@pytest.mark.parametrize("kept_s", [None, 0.5], ids=["per-unit", "kept"])
def test_another_process_reads_the_state_while_flushes_go_on(tmp_path, kept_s):
    """Kept across flushes (`kept_attached`), the file is still let go every `kept_s`, for long
    enough that a waiting reader gets it while the writes go on."""
    path = tmp_path / "state.duckdb"
    store = DuckDBStore(path)
    store.record_results(_results(0, 10), None)
    stop = threading.Event()

    def flushes() -> None:  # an apply's cadence: a small write every few hundredths of a second
        start = 10
        with store.kept_attached(kept_s) if kept_s else nullcontext():
            while not stop.wait(0.05):
                store.record_results(_results(start, 10), None)
                start += 10

    writer = threading.Thread(target=flushes)
    writer.start()
    try:
        threading.Event().wait(0.2)
        read = subprocess.run(
            [sys.executable, "-c", READER, str(path)], capture_output=True, text=True, timeout=60, check=False
        )
    finally:
        stop.set()
        writer.join()
    assert read.returncode == 0, read.stderr
    assert int(read.stdout) >= 10
    assert store.execute("SELECT count(*) FROM results")[0][0] > int(read.stdout)  # the flushes went on meanwhile
    store.close()


def test_the_host_instance_stays_open_across_small_units_even_when_they_are_slow(tmp_path):
    """Flushes on a busy machine take long in wall time but little CPU: reopening DuckDB for each
    one would cost more than the flush itself."""
    from batchor.state import duckdb_file

    store = DuckDBStore(tmp_path / "state.duckdb")
    store.record_results(_results(0, 10), None)
    hosts = []
    for start in range(10, 60, 10):
        with store.connection() as db:
            db.execute("SELECT count(*) FROM results").fetchall()
            threading.Event().wait(0.15)  # wall time passes (a busy machine), no CPU is used
        hosts.append(duckdb_file._HOST.db)
        store.record_results(_results(start, 10), None)
    assert hosts[0] is not None and all(host is hosts[0] for host in hosts)


def test_the_host_instance_closes_after_a_unit_that_used_much_cpu(tmp_path, monkeypatch):
    """A heavy query leaves memory with the DuckDB instance until it closes. (The bound is lowered
    so that a modest query passes it on any machine.)"""
    from batchor.state import duckdb_file

    store = DuckDBStore(tmp_path / "state.duckdb")
    store.record_results(_results(0, 10), None)
    with store.connection() as db:
        db.execute("SELECT count(*) FROM results").fetchall()
    assert duckdb_file._HOST.db is not None
    monkeypatch.setattr(duckdb_file._Host, "SMALL_UNIT_CPU_S", 0.005)
    with store.connection() as db:
        db.execute("SELECT sum(hash(range)) FROM range(20000000)").fetchall()
    assert duckdb_file._HOST.db is None


def _wal(path) -> bool:
    return path.with_name(path.name + ".wal").exists()


def test_a_kept_file_stays_attached_between_writes_and_is_checkpointed_when_the_block_ends(tmp_path):
    """Each write commits (to the WAL) but is not checkpointed while the file is kept: that
    checkpoint at every detach was most of a small flush's cost."""
    path = tmp_path / "state.duckdb"
    store = DuckDBStore(path)
    with store.kept_attached(30.0):
        store.record_results(_results(0, 10), None)
        assert _wal(path)  # still attached: the write sits committed in the WAL
        store.record_results(_results(10, 10), None)
        assert store.execute("SELECT count(*) FROM results")[0][0] == 20
    assert not _wal(path)  # detached (and so checkpointed) when the block ends
    store.record_results(_results(20, 10), None)
    assert not _wal(path)  # outside the block each unit detaches again
    store.close()


def test_a_kept_file_is_let_go_after_its_time_even_without_another_write(tmp_path):
    path = tmp_path / "state.duckdb"
    store = DuckDBStore(path)
    with store.kept_attached(2.0):  # long enough that a loaded machine still sees it kept
        store.record_results(_results(0, 10), None)
        assert _wal(path)
        deadline = time.monotonic() + 30
        while _wal(path) and time.monotonic() < deadline:  # let go by its timer, not by a write
            threading.Event().wait(0.1)
        assert not _wal(path)
        other = duckdb.connect(str(path))  # an instance of its own, as another process has: the file is free
        assert other.execute("SELECT count(*) FROM results").fetchall()[0][0] == 10
        other.close()
    store.close()


def test_another_store_of_the_same_process_opens_a_kept_file(tmp_path):
    path = tmp_path / "state.duckdb"
    store = DuckDBStore(path)
    with store.kept_attached(30.0):
        store.record_results(_results(0, 10), None)
        other = DuckDBStore(path)  # e.g. `status` through the Python API while a run writes
        assert other.execute("SELECT count(*) FROM results")[0][0] == 10
        store.record_results(_results(10, 10), None)
        assert other.execute("SELECT count(*) FROM results")[0][0] == 20
    other.close()
    store.close()


KILLED_WRITER = """
import sys, time
from pathlib import Path
import pyarrow as pa
from batchor.state import DuckDBStore
from batchor.state.base import RESULT_SCHEMA
n = 10
store = DuckDBStore(Path(sys.argv[1]))
with store.kept_attached(60.0):
    for start in range(0, 30, n):
        keys = [f"k{i}" for i in range(start, start + n)]
        store.record_results(pa.table({
            "request_key": keys, "step": ["s"] * n, "status": ["succeeded"] * n, "output": ["{}"] * n,
            "error_code": [None] * n, "error": [None] * n, "attempts": [1] * n, "input_tokens": [1] * n,
            "output_tokens": [1] * n, "cost_usd": [0.0] * n, "run_id": ["r1"] * n}, schema=RESULT_SCHEMA), None)
    print("written", flush=True)
    time.sleep(60)
"""


def test_writes_to_a_kept_file_survive_a_kill(tmp_path):
    """A write returns once committed: a process killed while it keeps the file loses none."""
    import signal

    path = tmp_path / "state.duckdb"
    DuckDBStore(path).close()
    writer = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "written"
        assert _wal(path)  # killed while attached, before any checkpoint
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    store = DuckDBStore(path)
    assert store.execute("SELECT count(*) FROM results")[0][0] == 30
    store.close()
