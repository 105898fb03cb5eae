"""Run limits: the spec's defaults in one place, the plan's and the caller's limits on top."""

from __future__ import annotations

from batchor.engine.limits import RunLimits
from batchor.spec.model import LimitsSpec


def test_defaults_are_the_spec_defaults():
    spec = LimitsSpec()
    limits = RunLimits.merged({})
    assert (limits.concurrency, limits.max_attempts, limits.request_timeout_s) == (
        spec.concurrency,
        spec.max_attempts,
        spec.request_timeout_s,
    )
    assert (limits.batch_poll_s, limits.batch_poll_max_s) == (spec.batch_poll_s, spec.batch_poll_max_s)
    assert limits.rpm is None and limits.pipeline is None


def test_later_layers_win_and_none_keeps_a_required_default():
    plan = LimitsSpec(concurrency=8, rpm=600).model_dump(mode="json")
    limits = RunLimits.merged(plan, {"max_attempts": 2, "concurrency": None, "rpm": None, "pipeline": False})
    assert (limits.concurrency, limits.max_attempts, limits.rpm, limits.pipeline) == (8, 2, None, False)


def test_a_rehearsal_drops_only_the_rate_limits():
    limits = RunLimits.merged({"rpm": 60, "tpm": 1000, "concurrency": 3}).without_rate_limits()
    assert (limits.rpm, limits.tpm, limits.concurrency) == (None, None, 3)
