"""A run held to a number of calls (`api.apply_compiled(max_calls=N)`, a pilot's allowance): no
attempt past N is sent, re-asks included, in realtime and batch mode; the run stops with its rows
pending and says it was the call allowance, not the money."""

from __future__ import annotations

import pytest

from batchor import api
from tests.engine.batch_helpers import batch_spec


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
@pytest.mark.parametrize("mode", ["realtime", "batch"])
def test_a_run_sends_no_attempt_past_its_call_allowance(fake, workdir, mode):
    fake.configure(malformed_times=1)  # every row's first answer is rejected: each row takes two calls
    spec = batch_spec(workdir, rows=12, batch_max_requests=4, max_attempts=3)
    outcome = api.apply_compiled(api.plan(str(spec), mode=mode, save=False), handle_signals=False, max_calls=9)
    sent = fake.stats()["batch_rows"] if mode == "batch" else fake.stats()["requests"]
    assert sent <= 9
    assert outcome.status == "budget" and "call allowance of 9 calls reached" in (outcome.stop_reason or "")
    assert outcome.progress["succeeded"] <= 4  # two calls per answered row
    rest = api.apply_compiled(api.plan(str(spec), mode=mode, save=False), handle_signals=False)
    assert rest.status == "succeeded"  # the rows the allowance left pending are sent by the next apply
