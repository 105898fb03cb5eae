"""A results line that is not JSON (a provider's corrupt or cut line) in each provider's Batch API.

Its row was run, and may have been billed: it fails with `batch_result_unreadable`, counted at its
worst case against the budget, and is not sent again by itself; the other rows of the batch keep
their answers. A line that does not even say whose it is fails every row of the batch left
without a result the same way (any of them may be the one billed). Never an internal error.
"""

from __future__ import annotations

import pytest

from tests.engine.batch_helpers import results, submitted
from tests.engine.test_batch_fault_matrix import _set_model_options, _state, apply, no_waiting  # noqa: F401
from tests.engine.test_batch_providers import spec_for

ROWS = 5


def _run(fake, workdir, provider: str, **config) -> dict:
    fake.reset(config=True, batches=True)
    fake.configure(batch_polls=1, **config)
    spec = spec_for(workdir, provider, rows=ROWS)
    if provider == "gemini":  # the results file path (inline responses are objects, never lines)
        _set_model_options(spec, {"batch_inline_max_bytes": 100})
    first = apply(workdir, spec)
    fake.configure(batch_broken_lines=0)
    second = apply(workdir, spec)
    return {"first": first, "second": second, "rows": results(workdir)}


@pytest.mark.slow  # ~4-8 s each (two applies through each SDK); the keyless cases below stay in the default tier
@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_a_line_that_is_not_json_fails_its_row_and_keeps_the_others(fake, workdir, no_waiting, provider):
    ran = _run(fake, workdir, provider, batch_broken_lines=2)
    assert (ran["first"]["status"], ran["first"]["exit"]) == ("partial", 3), ran["first"]
    codes = sorted(code or "" for _, code, _ in ran["rows"].values())
    assert codes == ["", "", "", "batch_result_unreadable", "batch_result_unreadable"], ran["rows"]
    assert set(submitted(fake).values()) == {1}, "a row whose result line was unreadable was sent again"
    assert ran["second"]["status"] == "partial" and fake.stats()["batches_created"] == 1


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_a_line_that_says_not_whose_it_is_fails_the_rows_left_without_a_result(fake, workdir, no_waiting, provider):
    ran = _run(fake, workdir, provider, batch_broken_lines=1, batch_broken_keep=0.01)
    assert (ran["first"]["status"], ran["first"]["exit"]) == ("partial", 3), ran["first"]
    codes = sorted(code or "" for _, code, _ in ran["rows"].values())
    assert codes == ["", "", "", "", "batch_result_unreadable"], ran["rows"]
    assert set(submitted(fake).values()) == {1} and fake.stats()["batches_created"] == 1


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_rows_whose_results_are_gone_are_not_sent_again_by_a_later_apply(fake, workdir, no_waiting):
    """404/410 on the results download: the rows may have been billed, so a plain apply later
    leaves them failed, as the README says; `--retry-failed` sends them."""
    ran = _run(fake, workdir, "openai", fault_plan={"openai.files.content": ["404"]})
    assert ran["first"]["status"] == "failed" and ran["second"]["status"] != "succeeded", ran["second"]
    assert {code for _, code, _ in ran["rows"].values()} == {"batch_results_gone"}
    assert fake.stats()["batches_created"] == 1
    spec = workdir / "spec.yaml"
    assert apply(workdir, spec, "--retry-failed")["status"] == "succeeded"
    assert fake.stats()["batches_created"] == 2


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
@pytest.mark.timeout(60)
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_results_download_that_keeps_failing_ends_the_run_in_flight(fake, workdir, no_waiting, provider):
    """Each round's poll succeeds (the batch has ended) and its download fails: after max_attempts
    rounds the run ends `in_flight` naming the endpoint (the successful poll must not restart the
    count: it looped forever), and once the provider serves the results a later apply collects them."""
    download = {"openai": "openai.files.content", "anthropic": "anthropic.batches.results"}[provider]
    ran = _run(fake, workdir, provider, fault_plan={download: ["500"] * 200})
    assert (ran["first"]["status"], ran["first"]["exit"]) == ("in_flight", 7), ran["first"]
    assert download in (ran["first"]["reason"] or "")
    fake.configure(fault_plan={})
    assert apply(workdir, workdir / "spec.yaml")["status"] == "succeeded"
    assert set(submitted(fake).values()) == {1} and fake.stats()["batches_created"] == 1
