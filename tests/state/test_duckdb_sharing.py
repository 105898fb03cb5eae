"""A DuckDB state is attached only for each unit of work, so another process (`batchor status`,
`plan`) reads it between an apply's flushes, while this process keeps writing."""

from __future__ import annotations

import subprocess
import sys
import threading

import pyarrow as pa

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
    return pa.table({
        "request_key": keys, "step": ["s"] * n, "status": ["succeeded"] * n, "output": ["{}"] * n,
        "error_code": [None] * n, "error": [None] * n, "attempts": [1] * n, "input_tokens": [1] * n,
        "output_tokens": [1] * n, "cost_usd": [0.0] * n, "run_id": ["r1"] * n}, schema=RESULT_SCHEMA)


def test_another_process_reads_the_state_while_flushes_go_on(tmp_path):
    path = tmp_path / "state.duckdb"
    store = DuckDBStore(path)
    store.record_results(_results(0, 10), None)
    stop = threading.Event()

    def flushes() -> None:  # an apply's cadence: a small write every few hundredths of a second
        start = 10
        while not stop.wait(0.05):
            store.record_results(_results(start, 10), None)
            start += 10

    writer = threading.Thread(target=flushes)
    writer.start()
    try:
        read = subprocess.run([sys.executable, "-c", READER, str(path)], capture_output=True, text=True,
                              timeout=60, check=False)
    finally:
        stop.set()
        writer.join()
    assert read.returncode == 0, read.stderr
    assert int(read.stdout) >= 10
    assert store.execute("SELECT count(*) FROM results")[0][0] > 10  # the flushes went on meanwhile
    store.close()


def test_the_host_instance_stays_open_across_small_units_even_when_they_are_slow(tmp_path):
    """Flushes on a busy machine take long in wall time but little CPU: reopening DuckDB for each
    one would cost more than the flush itself."""
    from batchor.state import duckdb_store

    store = DuckDBStore(tmp_path / "state.duckdb")
    store.record_results(_results(0, 10), None)
    hosts = []
    for start in range(10, 60, 10):
        with store.connection() as db:
            db.execute("SELECT count(*) FROM results").fetchall()
            threading.Event().wait(0.15)  # wall time passes (a busy machine), no CPU is used
        hosts.append(duckdb_store._HOST.db)
        store.record_results(_results(start, 10), None)
    assert hosts[0] is not None and all(host is hosts[0] for host in hosts)


def test_the_host_instance_closes_after_a_unit_that_used_much_cpu(tmp_path, monkeypatch):
    """A heavy query leaves memory with the DuckDB instance until it closes. (The bound is lowered
    so that a modest query passes it on any machine.)"""
    from batchor.state import duckdb_store

    store = DuckDBStore(tmp_path / "state.duckdb")
    store.record_results(_results(0, 10), None)
    with store.connection() as db:
        db.execute("SELECT count(*) FROM results").fetchall()
    assert duckdb_store._HOST.db is not None
    monkeypatch.setattr(duckdb_store._Host, "SMALL_UNIT_CPU_S", 0.005)
    with store.connection() as db:
        db.execute("SELECT sum(hash(range)) FROM range(20000000)").fetchall()
    assert duckdb_store._HOST.db is None
