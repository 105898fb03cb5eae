"""Plan-time choice of realtime or batch: `auto` settled by row count and deadline, and said."""

from __future__ import annotations

import pytest

from batchor import api
from batchor.errors import SpecError
from batchor.plan.mode import parse_duration
from tests.conftest import make_spec


def test_auto_resolves_from_the_count_and_the_plan_text_says_why(workdir):
    spec = make_spec(workdir, rows=12, limits={"mode": "auto", "batch_threshold": 10})
    plan = api.plan(str(spec), save=False)
    step = plan.header.steps[0]
    assert step.mode == "batch" and step.mode_note == "auto: 12 requests >= batch_threshold 10"
    from batchor.plan.summary import plan_text

    assert "[batch, auto: 12 requests >= batch_threshold 10]" in plan_text(plan)


def test_a_step_deadline_keeps_auto_realtime(workdir):
    spec = make_spec(workdir, rows=12, limits={"mode": "auto", "batch_threshold": 1})
    import yaml

    data = yaml.safe_load(spec.read_text())
    data["steps"]["classify"]["deadline"] = "30m"
    spec.write_text(yaml.safe_dump(data))
    assert api.plan(str(spec), save=False).header.steps[0].mode == "realtime"
    data["steps"]["classify"]["deadline"] = "2d"
    spec.write_text(yaml.safe_dump(data))
    assert api.plan(str(spec), save=False).header.steps[0].mode == "batch"


def test_batch_needs_a_provider_with_a_batch_api(workdir):
    spec = make_spec(workdir, rows=3, provider="openai-compatible", limits={"mode": "batch"})
    text = spec.read_text(encoding="utf-8")
    spec.write_text(text.replace("  name: gpt-4.1-mini\n", "  name: gpt-4.1-mini\n  custom: true\n"), encoding="utf-8")
    with pytest.raises(SpecError, match="no Batch API"):
        api.plan(str(spec), save=False)
    mocked = api.plan(str(make_spec(workdir, rows=3, limits={"mode": "batch"})), mock=True, save=False)
    assert mocked.header.steps[0].mode == "realtime" and "mock" in mocked.header.steps[0].mode_note


def test_durations():
    assert parse_duration("90s") == 90 and parse_duration("2h") == 7200 and parse_duration("1.5d") == 129600
    with pytest.raises(SpecError):
        parse_duration("soon")
