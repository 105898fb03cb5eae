"""Estimate vs actual everywhere: `status`, `runs` and the Python `Result` show per step what the
plan expected, what the run spent and their ratio (the plan's estimate is stored with the run)."""

from __future__ import annotations

import json

import pytest
from conftest import make_spec
from typer.testing import CliRunner

from batchor import api
from batchor.cli.main import app


def invoke(*args: str):
    done = CliRunner().invoke(app, list(args))
    assert done.exit_code == 0, done.output
    return done.output


def test_status_runs_and_result_show_the_estimate_next_to_the_spend(workdir, fake):
    spec = make_spec(workdir, rows=15)
    planned = api.plan(spec, save=False).header.steps[0]
    result = api.apply(spec, handle_signals=False)
    (step,) = result.steps
    assert step["step"] == "classify" and step["output_source"] == "heuristic" and step["input_source"] == "exact"
    assert step["expected_usd"] == pytest.approx(planned.counts.cost_expected)
    assert step["actual_usd"] == pytest.approx(result.cost_usd)
    assert step["ratio"] == pytest.approx(result.cost_usd / planned.counts.cost_expected)
    assert result.estimate["ratio"] == pytest.approx(step["ratio"])
    assert result.estimate["upper_usd"] >= result.estimate["actual_usd"]

    status = json.loads(invoke("status", "--json"))
    assert status["steps"][0]["ratio"] == pytest.approx(step["ratio"])
    human = invoke("status")
    assert "estimate vs actual" in human and f"{step['ratio']:.2f}x" in human and "heuristic" in human
    runs = json.loads(invoke("runs", "--json"))
    assert runs[0]["steps"][0]["actual_usd"] == pytest.approx(result.cost_usd)
    assert "vs plan" in invoke("runs") and f"{step['ratio']:.2f}x" in invoke("runs")


def test_a_run_that_stopped_early_is_compared_with_the_part_it_settled(workdir, fake):
    """A run stopped after half its requests spent about half the plan's expected cost: held to the
    whole plan its ratio would read ~0.5x (an estimate seemingly twice too high); held to the half
    it settled it reads like the run that finishes the job."""
    spec = make_spec(workdir, rows=12, limits={"concurrency": 1, "max_attempts": 3, "request_timeout_s": 10})
    fake.configure(fail_matching={"review number 6": "quota"})
    stopped = api.apply(spec, handle_signals=False)
    assert stopped.succeeded == 6 and "quota" in (stopped.stop_reason or "")
    (step,) = stopped.steps
    assert (step["requests"], step["settled_requests"]) == (12, 6)
    assert step["settled_expected_usd"] == pytest.approx(step["expected_usd"] / 2)
    assert step["ratio"] == pytest.approx(stopped.cost_usd / (step["expected_usd"] / 2))
    fake.configure(fail_matching={})
    rest = api.apply(spec, handle_signals=False)
    assert rest.succeeded == 6 and rest.steps[0]["settled_requests"] == rest.steps[0]["requests"] == 6
    assert step["ratio"] == pytest.approx(rest.steps[0]["ratio"], rel=0.25)  # like for like
    assert stopped.estimate["ratio"] == pytest.approx(step["ratio"])

    runs = invoke("runs")
    assert f"{step['ratio']:.2f}x" in runs and f"{rest.steps[0]['ratio']:.2f}x" in runs
    status = invoke("status", stopped.run_id)
    assert f"{step['ratio']:.2f}x (6 of 12 requests)" in status
