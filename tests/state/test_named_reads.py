"""The named reads of the ledger (state/reads.py) give the same answers on DuckDB and PostgreSQL:
the pilot, the planner's change report, the run report and the engine read the state through them."""

from __future__ import annotations

import time

import pyarrow as pa

from batchor.state.answer_stats import StepEstimate, record_run_steps
from batchor.state.base import ATTEMPT_SCHEMA, RunRecord
from tests.state.test_state_contract import _attempts, _results, store  # noqa: F401 - the two-backend fixture


def _a_job(store):
    """Job j (spec "spec"): runs r1 (a pilot) then r2; rows 1-3 of step s ask a, b, c; job k asked a."""
    store.start_run(RunRecord(run_id="r1", job_id="j", plan_id="p", name="spec"))
    time.sleep(0.01)  # r2 starts later
    store.start_run(RunRecord(run_id="r2", job_id="j", plan_id="p", name="spec"))
    store.start_run(RunRecord(run_id="r3", job_id="k", plan_id="q", name="spec"))
    estimate = StepEstimate("s", "len", "openai:m", 3, 10, 5, 0.1, 0.2, "heuristic", "exact")
    record_run_steps(store, "r1", [estimate], kind="pilot")
    store.add_run_requests("j", "s", pa.table({"row_key": ["1", "2", "3"], "request_key": ["a", "b", "c"]}))
    store.add_run_requests("k", "s", pa.table({"row_key": ["1"], "request_key": ["a"]}))
    store.record_results(
        _results(("a", "succeeded", "A", None, "r1"), ("b", "failed", None, "http_400", "r1")),
        _attempts("a", "b", run_id="r1"),
    )


def test_a_pilots_reads(store):
    _a_job(store)
    assert store.billed_calls(["r1"]) == 2 and store.billed_calls([]) == 0 and store.billed_calls(["r2"]) == 0
    assert store.accepted_per_step(["r1"], ["s", "t"]) == {"s": 2, "t": 0}
    assert sorted(store.requests_of_runs(["r1"])) == [("s", "a", "1"), ("s", "b", "2"), ("s", "c", "3")]
    attempts = sorted(store.billed_attempts(["r1"]))
    assert [tuple(a[:4]) for a in attempts] == [("s", "r1", "a", "ok"), ("s", "r1", "b", "ok")]
    assert [tuple(int(v) for v in a[4:]) for a in attempts] == [(5, 0, 1, 10, 8)] * 2
    assert sorted(store.pilot_costs("spec", False)) == [("a", 0.25), ("b", 0.25)]
    assert store.pilot_costs("other", False) == [] and store.pilot_costs("spec", True) == []
    assert sorted(store.pilot_requests("spec", False)) == [
        ("j", "s", "1", "a"),
        ("j", "s", "2", "b"),
        ("j", "s", "3", "c"),
    ]


def test_earlier_runs_and_jobs(store):
    _a_job(store)
    assert [job for job, _, _ in store.job_runs_of("spec")] == ["j", "j", "k"]
    first = store.get_run("r1")
    assert store.later_runs("j", first.started_at) == ["r2"]
    assert store.sent_before("spec", "s", "k") and not store.sent_before("spec", "t", "k")
    assert sorted(store.earlier_requests("spec", "s", "k")) == [("1", "a", "j"), ("2", "b", "j"), ("3", "c", "j")]
    assert store.collected_in_flight_runs("j", "r2") == []
    first.status = "in_flight"
    store.finish_run(first, final=False)
    assert store.collected_in_flight_runs("j", "r2") == ["r1"]


def test_a_run_reports_reads(store):
    _a_job(store)
    assert [tuple(r) for r in store.rows_by_status("j")] == [("s", 3, 1, 1)]
    assert store.step_costs("j") == {"s": 1.0}
    assert [tuple(r) for r in store.failed_by_reason("j")] == [("s", "http_400", 1)]
    assert [tuple(r) for r in store.failed_examples("j", 3)] == [("s", "http_400", "2", "b", "boom")]
    assert [tuple(r) for r in store.answered_samples("j", 5)] == [("s", "1", "A")]
    assert bytes(store.last_raw("a")) == b"\x00raw" and store.last_raw("zz") is None
    (figures,) = store.run_attempt_figures("j", "r1")
    assert figures[0] == "s" and [int(v) for v in figures[1:7]] == [2, 2, 0, 0, 20, 10] and float(figures[7]) == 0.5
    assert [tuple(int(v) for v in r[1:]) for r in store.run_latency_buckets("j", "r1")] == [(2, 2)]


def test_rejections_a_crash_left_without_a_result(store):
    rejected = _attempts("x", "a").to_pylist()
    for row in rejected:
        row.update(outcome="invalid_output", feedback='{"rejected": "no", "violations": ["v"]}')
    store.record_results(_results(("a", "succeeded", "A", None, "r1")), pa.Table.from_pylist(rejected, ATTEMPT_SCHEMA))
    assert [tuple(r[:2]) for r in store.pending_rejections(["s"])] == [("x", 1)]
    assert store.pending_rejections([]) == [] and store.pending_rejections(["t"]) == []
