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
