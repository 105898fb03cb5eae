"""The plan pins the spec's limits as a typed `PlanLimits`: read by attribute, written to the plan
file exactly as before (same JSON, so plan ids are unchanged), and an older file still loads."""

from __future__ import annotations

import pydantic
import pytest
from conftest import make_spec

from batchor import api
from batchor.plan.model import PlanLimits
from batchor.plan.plan_file import CompiledPlan
from batchor.spec.model import LimitsSpec


def test_the_plan_reads_its_limits_by_attribute_and_writes_them_as_before(workdir):
    limits = {"max_cost_usd": 2.5, "max_attempts": 2, "on_truncation": "reask"}
    plan = api.plan(str(make_spec(workdir, rows=3, limits=limits)))
    assert isinstance(plan.header.limits, PlanLimits)
    assert (plan.header.limits.max_cost_usd, plan.header.limits.max_attempts) == (2.5, 2)
    written = plan.header.model_dump(mode="json")["limits"]
    assert written == LimitsSpec(**limits).model_dump(mode="json")
    loaded = CompiledPlan.load(plan.saved_path)
    assert loaded.header.limits == plan.header.limits and loaded.header.plan_id == plan.header.plan_id


def test_a_limit_an_older_version_wrote_is_ignored_and_the_limits_are_frozen():
    pinned = PlanLimits.model_validate({**LimitsSpec().model_dump(mode="json"), "retired_limit": 3})
    assert pinned == PlanLimits()
    with pytest.raises(pydantic.ValidationError):
        pinned.max_attempts = 9  # type: ignore[misc]
