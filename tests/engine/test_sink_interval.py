"""The result sink's flush interval (engine/sink.py): a write that took long spaces the next ones
out, so a busy machine spends about WRITE_SHARE of the time writing, not most of its CPU."""

from __future__ import annotations

from batchor.engine.sink import WRITE_SHARE, ResultSink
from batchor.state import open_state


def _answer(sink: ResultSink, key: str) -> None:
    sink.add_result(
        key=key,
        step="s",
        status="succeeded",
        output="ok",
        error_code=None,
        error=None,
        attempts=1,
        input_tokens=3,
        output_tokens=1,
        cost_usd=0.0,
    )


def test_a_slow_write_spaces_the_next_flushes_out(tmp_path):
    now = [100.0]
    took = [0.05]

    def slow_write(_table):  # the clock moves while the state is written, as on a busy machine
        now[0] += took[0]

    sink = ResultSink(open_state(str(tmp_path / "state.duckdb")), "run1", before_store=slow_write, clock=lambda: now[0])
    _answer(sink, "k1")
    now[0] += sink.flush_interval_s
    assert sink.due()  # a quick machine: the interval as set
    sink.flush_sync()
    _answer(sink, "k2")
    now[0] += sink.flush_interval_s
    assert sink.due()  # the write took 0.05 s: still the interval as set
    took[0] = 1.0
    sink.flush_sync()  # this one took a second
    _answer(sink, "k3")
    now[0] += sink.flush_interval_s
    assert not sink.due()
    now[0] += 1.0 / WRITE_SHARE - sink.flush_interval_s - took[0]
    assert sink.due()
    sink.flush_sync()
    assert sink.flushed == 3
