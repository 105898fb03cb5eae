"""What a pilot's re-asks say about the rest: a structured step whose first asks were never
rejected may still be (the interval's upper end allows for it), and an answer cut by the token
limit that `limits.on_truncation: reask` asks again is a re-ask like a rejected one (the estimate,
its interval and the pilot's call count include it). Real openai SDK against the fake."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from batchor.pilot import run_pilot
from batchor.plan.calibrate import calibrate, calibration_lines
from batchor.state import open_state
from batchor.state.answer_stats import output_stats
from tests.conftest import make_spec


def test_a_pilot_that_saw_no_rejection_keeps_none_expected_but_allows_for_three_in_n_above(fake, workdir):
    """20 structured first asks, none rejected: the true share may still be up to 3/20 (rule of
    three). The expected cost keeps no re-ask; the upper end adds 15 % of the rest's requests asked
    again (a re-ask costing 1-3 first asks: the input again, the answer sent back, a new answer)."""
    result = run_pilot(make_spec(workdir, rows=60), 20, handle_signals=False)
    step = result.calibration.steps[0]
    assert step.reask_rate == 0.0 and step.measured.first_asks == 20 and step.measured.first_rejected == 0
    first_ask = step.expected / step.requests  # no re-ask expected: what a request costs
    assert 1.0 <= step.unseen / (step.requests * 3 / 20 * first_ask) <= 3.0
    assert step.high == pytest.approx(step.expected + step.shift + math.hypot(step.half, step.unseen))
    assert step.low == pytest.approx(step.expected - step.half + step.shift)  # the lower end as before
    total = result.calibration  # one step: the total's ends are the step's
    assert (total.expected, total.low, total.high) == pytest.approx((step.expected, step.low, step.high))
    assert "re-asks 0% (none in 20 first asks; the upper end allows up to 15%)" in "\n".join(calibration_lines(total))
    header = result.plan.header
    store = open_state(str(workdir / ".batchor" / "state.duckdb"))
    stats = output_stats(store, [header.steps[0].length_key])
    store.close()
    once = calibrate(header.model_copy(update={"limits": header.limits.model_copy(update={"max_attempts": 1})}), stats)
    assert once.steps[0].unseen == 0.0  # never asked again: nothing to allow for


def truncating_spec(folder: Path, **limits) -> Path:
    """A text step whose every first answer (~8 tokens at the fake) is cut at max_tokens 5; asked
    again with 10 it is answered."""
    path = make_spec(folder, rows=40, schema=None)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["model"]["params"]["max_tokens"] = 5
    data["limits"].update(limits)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def test_truncation_re_asks_count_as_re_asks_in_the_estimate_and_the_pilots_calls(fake, workdir):
    result = run_pilot(truncating_spec(workdir, on_truncation="reask"), 12, handle_signals=False)
    assert fake.stats()["requests"] == result.calls <= 12  # each truncated ask and its re-ask counted
    step = result.calibration.steps[0]
    assert step.measured.first_asks > step.measured.answers >= 3  # the allowance cut some re-asks
    assert step.reask_rate == 1.0  # every first answer truncated and asked again
    planned = result.plan.header.steps[0]
    assert planned.input_factor == pytest.approx(2.0)  # the rest: each request sent twice
    assert planned.answer_share == 1.0  # a truncated answer asked again is answered, not failed
    rest = step.requests
    assert step.expected == pytest.approx(planned.counts.cost_expected) and rest > 0
