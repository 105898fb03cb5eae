"""A realtime call that times out may have been billed (the provider ran it; only its answer was
lost): its reservation is spent, not handed to the retry, so `--max-cost` holds even when every
such call was billed at its worst case."""

from __future__ import annotations

import pytest
import yaml
from conftest import make_spec

from batchor import api


@pytest.mark.slow  # real timeouts and backoff waits: ~5 s
def test_calls_that_time_out_are_counted_at_their_worst_case_against_the_budget(fake, workdir):
    spec = make_spec(workdir, rows=4)
    data = yaml.safe_load(spec.read_text())
    data["limits"].update(max_attempts=6, request_timeout_s=0.2, concurrency=4)
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    plan = api.plan(spec, save=False)
    per_call = plan.header.totals.cost_upper / 4  # one attempt of each row at its worst case
    budget = per_call * 4 * 1.5
    fake.configure(timeout=1.0, timeout_hold_s=0.5)  # every call runs, then its answer is lost
    result = api.apply(spec, max_cost=budget, handle_signals=False)
    calls = fake.stats()["requests"]
    assert calls * per_call <= budget * (1 + 1e-9), f"{calls} calls may have cost {calls * per_call} > {budget}"
    assert result.status == "budget" and result.succeeded == 0
