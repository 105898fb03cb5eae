"""The pilot from Python (`batchor.apply(spec, pilot=N|"auto")`) gives the guarantees of `apply --pilot`:
one budget for the pilot and the rest (a rest above what the pilot left is refused before it sends
anything), no rest after a pilot whose answers were all rejected (`pilot_unanswered`), and the rest
paying only for rows the pilot did not answer. Real openai SDK against the fake provider."""

from __future__ import annotations

import pytest

import batchor
from batchor.errors import CostLimitError, PilotUnansweredError, UsageError
from batchor.pilot import pilot_plan, run_pilot
from tests.conftest import make_spec

ROWS = 60


def test_apply_with_a_pilot_runs_the_pilot_then_only_the_rest(fake, workdir):
    spec = make_spec(workdir, rows=ROWS)
    result = batchor.apply(spec, pilot=10, handle_signals=False, progress=False)
    assert result.status == "succeeded" and result.pilot is not None
    assert result.pilot.rows == 10 and result.pilot.cost_usd > 0
    assert result.succeeded + result.cached == ROWS  # the rest answered; the pilot's rows came from the cache
    assert result.cached >= 10
    assert fake.stats()["answered"] == ROWS  # each row paid once: the pilot's 10, then the rest's 50
    assert len(result.data) == ROWS


def test_the_budget_covers_the_pilot_and_the_rest_from_python_too(fake, workdir):
    """As `apply --pilot --max-cost`: a rest that fits the whole budget but not what the pilot left is
    refused, and nothing beyond the pilot's rows is sent."""
    probe = make_spec(workdir / "probe", rows=ROWS)
    piloted = run_pilot(probe, 10, handle_signals=False)
    rest, spent = piloted.plan.header.totals.cost_upper, piloted.cost_usd
    budget = rest + spent / 2  # the rest alone fits; the pilot and the rest together do not
    assert spent > 0 and pilot_plan(probe, 10).header.totals.cost_upper < budget
    spec = make_spec(workdir / "job", rows=ROWS)
    before = fake.stats()["answered"]
    with pytest.raises(CostLimitError) as refused:
        batchor.apply(spec, pilot=10, max_cost=budget, handle_signals=False, progress=False)
    assert "left of --max-cost" in refused.value.message and "nothing more was sent" in refused.value.message
    assert fake.stats()["answered"] - before == 10  # the pilot's rows, not one more


def test_no_rest_from_python_after_a_pilot_without_a_valid_answer(fake, workdir):
    fake.configure(reject_share=[1.0, 1.0])
    spec = make_spec(workdir, rows=ROWS)
    with pytest.raises(PilotUnansweredError) as refused:
        batchor.apply(spec, pilot=10, handle_signals=False, progress=False)
    assert refused.value.code == "pilot_unanswered" and "classify" in refused.value.message
    assert 0 < fake.stats()["answered"] <= 10  # the pilot's calls, nothing for the rest
    assert not (workdir / "out" / "results.csv").exists()


def test_an_auto_pilot_from_python_grows_then_runs_the_rest(fake, workdir):
    spec = make_spec(workdir, rows=120)
    result = batchor.apply(spec, pilot="auto", max_cost=10, handle_signals=False, progress=False)
    assert result.status == "succeeded" and result.pilot is not None and result.pilot.rows >= 50
    assert fake.stats()["answered"] == 120  # every row once, the pilot's rounds included


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"pilot": 0}, "give a number of rows"),
        ({"pilot": "many"}, "give a number of rows"),
        ({"pilot": 5, "limit": 3}, "does not combine"),
    ],
)
def test_pilot_arguments_are_refused_as_the_cli_refuses_them(fake, workdir, kwargs, words):
    with pytest.raises(UsageError) as refused:
        batchor.apply(make_spec(workdir, rows=ROWS), handle_signals=False, progress=False, **kwargs)
    assert words in refused.value.message
    assert fake.stats()["answered"] == 0
