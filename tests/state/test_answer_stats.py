"""Answer statistics read the same on DuckDB and PostgreSQL: per length key and run kind, per model,
and per step of a run (its stored estimate next to its spend)."""

from __future__ import annotations

import dataclasses
import math
import statistics

import pyarrow as pa
import pytest

from batchor.state import DuckDBStore, PostgresStore
from batchor.state.answer_stats import (
    StepEstimate,
    input_calibration,
    output_stats,
    record_run_steps,
    run_step_report,
    tag_run_kind,
    when_share,
)
from batchor.state.base import ATTEMPT_SCHEMA, RESULT_SCHEMA


@pytest.fixture(params=["duckdb", "postgres"])
def store(request, tmp_path):
    made = (
        DuckDBStore(tmp_path / "state.duckdb")
        if request.param == "duckdb"
        else PostgresStore(request.getfixturevalue("pg_url"))
    )
    yield made
    made.close()


def estimate(step: str, key: str, model: str = "anthropic:claude", usd: float = 1.0) -> StepEstimate:
    return StepEstimate(
        step=step,
        length_key=key,
        model=model,
        requests=3,
        input_tokens=300,
        output_tokens=60,
        expected_usd=usd,
        upper_usd=usd * 4,
        output_source="heuristic",
        input_source="estimate",
    )


def attempts(run_id: str, step: str, rows: list[tuple]) -> pa.Table:
    """rows of (key, attempt, outcome, input_tokens, output_tokens, counted_input_tokens, cost)"""
    n = len(rows)
    return pa.table(
        {
            "request_key": [r[0] for r in rows],
            "run_id": [run_id] * n,
            "attempt": [r[1] for r in rows],
            "outcome": [r[2] for r in rows],
            "status_code": [200] * n,
            "error": [None] * n,
            "duration_ms": [1] * n,
            "raw": [None] * n,
            "input_tokens": [r[3] for r in rows],
            "output_tokens": [r[4] for r in rows],
            "cost_usd": [r[6] for r in rows],
            "estimated": [False] * n,
            "step": [step] * n,
            "counted_input_tokens": [r[5] for r in rows],
            "feedback": [None] * n,
            "cache_read_tokens": [None] * n,
            "cache_write_tokens": [None] * n,
            "uncached_usd": [None] * n,
        },
        schema=ATTEMPT_SCHEMA,
    )


def no_results() -> pa.Table:
    return RESULT_SCHEMA.empty_table()


def test_statistics_per_length_key_kind_and_model(store):
    record_run_steps(store, "r1", [estimate("a", "k1"), estimate("b", "k2", model="openai:gpt")])
    record_run_steps(store, "r1", [estimate("a", "other")])  # a worker joining the run adds nothing
    record_run_steps(store, "r2", [estimate("a", "k1")], kind="pilot")
    store.record_results(
        no_results(),
        attempts(
            "r1",
            "a",
            [
                ("x", 1, "invalid_output", 110, 40, 100, 0.1),
                ("x", 2, "ok", 130, 10, None, 0.1),
                ("y", 1, "ok", 120, 20, 100, 0.1),
                ("z", 1, "rate_limited", 0, 0, None, 0.0),
            ],
        ),
    )
    store.record_results(no_results(), attempts("r1", "b", [("w", 1, "ok", 50, 500, 50, 0.2)]))
    store.record_results(no_results(), attempts("r2", "a", [("v", 1, "ok", 100, 30, 80, 0.3)]))

    stats = output_stats(store, ["k1", "k2", "none"])
    apply, pilot = stats["k1"].by_kind["apply"], stats["k1"].by_kind["pilot"]
    assert (apply.answers, apply.attempts, apply.answer_tokens, apply.attempt_tokens) == (2, 3, 30, 70)
    assert apply.mean == 15 and apply.tokens_per_request == 35 and apply.attempts_per_request == 1.5
    assert apply.stdev == pytest.approx(7.0710678)
    assert (pilot.answers, pilot.answer_tokens) == (1, 30)
    assert stats["k1"].total.answers == 3 and stats["k2"].total.max_tokens == 500
    assert stats["none"].total.answers == 0

    calibration = input_calibration(store, ["anthropic:claude", "nobody:none"])["anthropic:claude"]
    assert (calibration.answers, calibration.counted, calibration.reported) == (3, 280, 330)
    assert calibration.max_ratio == pytest.approx(1.25)
    assert calibration.spread == pytest.approx(statistics.stdev([110 / 100, 120 / 100, 100 / 80]))
    assert input_calibration(store, ["nobody:none"])["nobody:none"].answers == 0

    tag_run_kind(store, "r1", "pilot")
    assert set(output_stats(store, ["k1"])["k1"].by_kind) == {"pilot"}


def test_a_runs_estimate_next_to_its_spend(store):
    record_run_steps(store, "r1", [estimate("a", "k1", usd=0.25), estimate("b", "k2", usd=0.0)])
    store.record_results(
        no_results(), attempts("r1", "a", [("x", 1, "ok", 10, 10, 10, 0.2), ("y", 1, "ok", 10, 10, 10, 0.1)])
    )
    a, b = run_step_report(store, "r1")
    assert (a["step"], a["expected_usd"], a["upper_usd"]) == ("a", 0.25, 1.0)
    assert a["actual_usd"] == pytest.approx(0.3) and a["settled_requests"] == 2  # of the 3 it planned
    assert a["ratio"] == pytest.approx(0.3 / (0.25 * 2 / 3))  # held to the part it sent
    assert (b["actual_usd"], b["ratio"]) == (0.0, None)  # nothing expected: no ratio
    assert run_step_report(store, "r-unknown") == []


def test_a_when_share_counts_rows_whose_upstream_answered_once_across_jobs(store):
    """Rows a step's `when:` let run (a request) or not (none), of the rows whose upstream answer
    exists; a row drawn by two jobs (a pilot and the run after it) counts once."""
    for run, job in (("r1", "j1"), ("r2", "j2"), ("r3", "j3")):
        store.execute("INSERT INTO runs (run_id, job_id) VALUES (?, ?)", [run, job])
    record_run_steps(store, "r1", [dataclasses.replace(estimate("second", "k2"), when_key="w")])
    record_run_steps(store, "r2", [dataclasses.replace(estimate("second", "k2"), when_key="w")])
    record_run_steps(store, "r3", [dataclasses.replace(estimate("second", "k2"), when_key="other")])
    rows = {
        "j1": [("a", "ka", "sa"), ("b", "kb", None), ("c", "kc", None), ("d", "kd", None)],
        "j2": [("a", "ka", "sa"), ("b", "kb", None)],
        "j3": [("e", "ke", "se")],
    }
    for job, found in rows.items():
        for row, first, second in found:
            store.execute(
                "INSERT INTO job_requests (job_id, step, row_key, request_key) VALUES (?, 'first', ?, ?)",
                [job, row, first],
            )
            store.execute(
                "INSERT INTO job_requests (job_id, step, row_key, request_key) VALUES (?, 'second', ?, ?)",
                [job, row, second],
            )
    for key, status in (
        ("ka", "succeeded"),
        ("kb", "succeeded"),
        ("kc", "succeeded"),
        ("kd", "failed"),
        ("ke", "succeeded"),
    ):
        store.execute("INSERT INTO results (request_key, step, status) VALUES (?, 'first', ?)", [key, status])
    assert when_share(store, "w", ["first"]) == (1, 3)  # d's upstream failed: skipped, not by `when:`
    assert when_share(store, "other", ["first"]) == (1, 1) and when_share(store, "none", ["first"]) == (0, 0)


def sample_skewness(values: list[float]) -> float:
    """The adjusted Fisher-Pearson sample skewness, from its definition."""
    n, mean = len(values), statistics.fmean(values)
    m2 = sum((v - mean) ** 2 for v in values) / n
    m3 = sum((v - mean) ** 3 for v in values) / n
    return m3 / m2**1.5 * (n * (n - 1)) ** 0.5 / (n - 2)


def test_the_answers_skewness_is_read_from_the_ledger_without_overflow(store):
    """Long answers cubed pass a 32-bit integer (PostgreSQL would refuse the sum); rejected
    attempts are not answers, so not in the skewness."""
    lengths = [40, 52, 61, 75, 90, 120, 180, 2600]
    record_run_steps(store, "r1", [estimate("a", "k1")])
    rows = [(f"x{i}", 1, "ok", 10, n, 10, 0.1) for i, n in enumerate(lengths)]
    store.record_results(no_results(), attempts("r1", "a", [*rows, ("y", 1, "invalid_output", 10, 9000, 10, 0.1)]))
    stats = output_stats(store, ["k1"])["k1"].total
    assert stats.answers == len(lengths) and stats.skewness == pytest.approx(sample_skewness(lengths))
    assert stats.skewness > 2  # one long answer among short ones
    assert dataclasses.replace(stats, answers=2).skewness == 0.0  # two answers: no skewness
    logs = [math.log(n) for n in lengths]  # the logs' spread and skewness (plan/calibrate.py capped_skewness)
    assert stats.log_variance == pytest.approx(statistics.variance(logs))
    assert stats.log_skewness == pytest.approx(sample_skewness(logs))


def test_re_asks_are_counted_in_stages_whatever_the_attempt_numbers(store):
    """A request's billed attempts in order: the first is its first ask, the rest re-asks (an
    unbilled 500 between them moves no stage); a request cut before its re-ask (a pilot's
    allowance) counts its rejected first ask, so the shares are not read low; what a re-ask
    reads beyond its first attempt (the rejected answer and the feedback) is summed."""
    record_run_steps(store, "r1", [estimate("a", "k1")])
    store.record_results(
        no_results(),
        attempts(
            "r1",
            "a",
            [
                ("x", 1, "invalid_output", 100, 40, 90, 0.1),
                ("x", 2, "server_error", 0, 0, None, 0.0),
                ("x", 3, "ok", 150, 10, None, 0.1),
                ("y", 1, "ok", 120, 20, 100, 0.1),
                ("z", 1, "invalid_output", 80, 30, 70, 0.1),  # cut: its re-ask never sent
                ("w", 1, "invalid_output", 60, 20, 50, 0.1),
                ("w", 2, "invalid_output", 90, 25, None, 0.1),
                ("w", 3, "ok", 100, 15, None, 0.1),
                ("v", 1, "refused", 70, 5, 60, 0.1),
            ],
        ),
    )
    stats = output_stats(store, ["k1"])["k1"].total
    assert (stats.first_asks, stats.first_rejected, stats.first_failed) == (5, 3, 1)
    assert (stats.reasks, stats.reasks_rejected, stats.reask_tokens) == (3, 1, 50)
    assert stats.reask_added_input == (150 - 100) + (90 - 60) + (100 - 60)
    assert stats.reject_first == pytest.approx(3 / 5) and stats.reject_again == pytest.approx(1 / 3)
    p1, p2 = 3 / 5, 1 / 3
    assert stats.reasks_per_request(4) == pytest.approx(p1 * (1 + p2 + p2**2))
    assert stats.reasks_per_request(1) == 0.0  # no re-ask allowed
    assert stats.first_tokens_each == pytest.approx((40 + 20 + 30 + 20 + 5) / 5)
    assert stats.reask_input_each == pytest.approx(120 / 3) and stats.reask_tokens_each == pytest.approx(50 / 3)
    assert (stats + stats).reasks_per_request(4) == pytest.approx(stats.reasks_per_request(4))


def test_truncated_answers_are_counted_apart_and_count_as_re_asked_where_the_spec_says_so(store):
    """A truncated first ask fails for good by default; with `limits.on_truncation: reask` it was
    asked again with a larger limit (`truncations_reasked`: rejected, not failed), and a re-ask
    truncated again is rejected again."""
    record_run_steps(store, "r1", [estimate("a", "k1")])
    store.record_results(
        no_results(),
        attempts(
            "r1",
            "a",
            [
                ("t", 1, "truncated", 100, 50, 90, 0.1),
                ("t", 2, "truncated", 100, 100, None, 0.1),
                ("t", 3, "ok", 100, 130, None, 0.1),
                ("u", 1, "truncated", 80, 50, 70, 0.1),  # cut (or on_truncation: fail): no second attempt
                ("y", 1, "ok", 120, 20, 100, 0.1),
                ("x", 1, "invalid_output", 60, 20, 50, 0.1),
                ("x", 2, "ok", 90, 25, None, 0.1),
            ],
        ),
    )
    stats = output_stats(store, ["k1"])["k1"].total
    assert (stats.first_asks, stats.first_rejected, stats.first_failed, stats.first_truncated) == (4, 1, 2, 2)
    assert (stats.reasks, stats.reasks_rejected, stats.reasks_truncated) == (3, 0, 1)
    asked = stats.truncations_reasked()
    assert (asked.first_rejected, asked.first_failed, asked.reasks_rejected) == (3, 0, 1)
    assert asked.reject_first == pytest.approx(3 / 4) and asked.reject_again == pytest.approx(1 / 3)
    assert stats.reasks_per_request(3) == pytest.approx(1 / 4)  # only the rejection asked again
