"""The plan's expected cost of fallback models (plan/fallback_cost.py): without earlier runs it
expects none (the upper bound counts every row); once runs or a pilot of the same step measured
the share of requests that fell back, the expected cost adds that share at the fallback model's
price, and the plan says where the share came from. Real openai and anthropic SDKs against the fake."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import batchor
from batchor import api
from batchor.plan.summary import fallback_line
from tests.conftest import write_csv
from tests.engine.test_fallback_models import PRIMARY, fallback_spec

FAILING = {"review number 3": "malformed", "review number 5": "malformed", "review number 7": "malformed"}


def more_rows(workdir: Path, rows: int) -> None:
    """The same job over a bigger input: the new rows are requests still to run."""
    write_csv(workdir / "data.csv", [{"id": f"r{i}", "text": f"review number {i}"} for i in range(rows)])


def without_fallback(spec: Path) -> Path:
    text = spec.read_text().replace("  fallback:\n  - anthropic:claude-haiku-4-5\n", "")
    bare = spec.with_name("bare.yaml")
    bare.write_text(text)
    return bare


def test_the_share_measured_by_earlier_runs_is_priced_and_named(workdir, fake):
    fake.configure(fail_model={PRIMARY: FAILING})
    spec = fallback_spec(workdir, rows=20)
    first = api.plan(spec, save=False).header.steps[0]
    assert first.fallback_share is None and "none expected" in fallback_line(first)
    api.apply(spec, handle_signals=False)  # 3 of 20 fall back (r3, r5, r7)
    more_rows(workdir, 60)
    step = api.plan(spec, save=False).header.steps[0]
    assert step.counts.to_run == 40
    assert step.fallback_share == pytest.approx(3 / 20)
    assert step.fallback_share_source == "history: 20 requests"
    assert "15.0% expected to fall back, as measured in history: 20 requests" in fallback_line(step)
    bare = api.plan(without_fallback(spec), save=False).header.steps[0]
    added = step.counts.cost_expected - bare.counts.cost_expected
    assert added > 0  # the old plan added nothing here
    assert added < 3 / 20 * (step.counts.cost_upper - bare.counts.cost_upper)


def test_a_pilots_share_is_named_as_the_pilots(workdir, fake):
    fake.configure(fail_model={PRIMARY: FAILING})
    spec = fallback_spec(workdir, rows=20)
    batchor.apply(spec, pilot=10, handle_signals=False, progress=False)
    more_rows(workdir, 40)
    step = api.plan(spec, save=False).header.steps[0]
    assert step.fallback_share is not None and step.fallback_share > 0
    assert re.search(r"pilot: \d+ requests", step.fallback_share_source or ""), step.fallback_share_source
