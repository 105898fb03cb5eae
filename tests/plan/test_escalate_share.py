"""The plan's expected cost of an escalation (`escalate:`): priced for every row until earlier runs
or a pilot of the same step measured the share of answers that escalated; then that share, named
with where it came from, while the upper bound still counts every row. Real openai SDK, the fake."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

import batchor
from batchor import api
from batchor.plan.model import output_per_request
from batchor.plan.prices import ModelPrice
from batchor.plan.summary import escalate_line
from tests.conftest import make_spec
from tests.engine.test_other_models_batch import SCHEMA, STRONG
from tests.plan.test_fallback_share import more_rows


def cascade_spec(workdir: Path, rows: int) -> Path:
    path = make_spec(workdir, rows=rows, output={"path": "out/results.parquet"}, limits={"concurrency": 4})
    spec = yaml.safe_load(path.read_text())
    spec["model"] = {"provider": "openai", "name": "gpt-4.1-mini", "params": {"temperature": 0, "max_tokens": 50}}
    when = "classify.confidence < 0.5"
    spec["steps"]["classify"].update(
        {"output": {"schema": SCHEMA}, "escalate": {"to": f"openai:{STRONG}", "when": when}}
    )
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def escalated(workdir: Path) -> int:
    """Rows whose own answer was replaced by the stronger model's (linked by `answered_by`)."""
    import duckdb

    with duckdb.connect(str(workdir / ".batchor" / "state.duckdb"), read_only=True) as db:
        found = db.execute("SELECT count(*) FROM results WHERE answered_by IS NOT NULL AND status = 'succeeded'")
        return int(found.fetchone()[0])


def without_escalation(spec: Path) -> Path:
    data = yaml.safe_load(spec.read_text())
    del data["steps"]["classify"]["escalate"]
    bare = spec.with_name("bare.yaml")
    bare.write_text(yaml.safe_dump(data, sort_keys=False))
    return bare


def test_the_escalated_share_of_earlier_runs_is_priced_and_named(workdir, fake):
    spec = cascade_spec(workdir, rows=20)
    first = api.plan(spec, save=False).header.steps[0]
    assert first.escalate_share is None and "priced as if every row is" in escalate_line(first)
    api.apply(spec, handle_signals=False)
    up = escalated(workdir)
    assert 0 < up < 20, "the fake's confidences should split the rows"
    more_rows(workdir, 60)
    step = api.plan(spec, save=False).header.steps[0]
    assert step.escalate_share == pytest.approx(up / 20)
    assert f"{up / 20:.1%} expected to escalate, as measured in history: 20 requests" in escalate_line(step)
    # the stronger model is expected for that share of the rows; the upper bound still counts every row
    bare = api.plan(without_escalation(spec), save=False).header.steps[0]
    strong = step.escalation
    price = ModelPrice.from_dict(strong.price)
    every = price.cost(step.counts.input_tokens, round(step.counts.to_run * output_per_request(strong)))
    assert step.counts.cost_expected - bare.counts.cost_expected == pytest.approx(up / 20 * every, rel=1e-6)
    assert step.counts.cost_upper - bare.counts.cost_upper > every


def test_a_pilots_escalated_share_is_named_as_the_pilots(workdir, fake):
    spec = cascade_spec(workdir, rows=20)
    batchor.apply(spec, pilot=10, handle_signals=False, progress=False)
    more_rows(workdir, 40)
    step = api.plan(spec, save=False).header.steps[0]
    assert step.escalate_share is not None
    assert re.search(r"pilot: \d+ requests", step.escalate_share_source or ""), step.escalate_share_source
