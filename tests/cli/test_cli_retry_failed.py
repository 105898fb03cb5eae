"""Failures that do not deserve a retry stay failed: a request refused with a deterministic error
(400 invalid request, refusal, context too long) is paid once; a later apply leaves it failed and
the plan counts it apart, until `--retry-failed` (or `--refresh STEP`) asks for it again. Transient
failures (5xx after every attempt) are sent again as before. Real CLI and SDK against the fake."""

from __future__ import annotations

import json

import pytest
import yaml

import batchor
from tests.conftest import make_spec, write_csv


def _sent(fake) -> dict[str, int]:
    return fake.stats()["by_status"]


def test_a_400_is_paid_once_until_retry_failed(workdir, fake, batchor_cli):
    spec = make_spec(workdir, rows=6, limits={"concurrency": 2, "max_attempts": 2, "request_timeout_s": 10})
    fake.configure(fail_matching={"review number 3": 400, "review number 4": 500})
    first = batchor_cli(workdir, "apply", spec, "--max-cost", "1")
    assert first.returncode == 3, first.stderr  # rows failed
    assert _sent(fake) == {"200": 4, "400": 1, "500": 2}  # the 500 used both attempts

    fake.reset()
    plan = json.loads(batchor_cli(workdir, "plan", spec, "--json").stdout)
    counts = plan["steps"][0]
    assert (counts["to_run"], counts["failed_earlier"], plan["totals"]["failed_earlier"]) == (1, 1, 1)
    text = batchor_cli(workdir, "plan", spec).stdout
    assert "1 failed earlier, not retried" in text and "--retry-failed" in text

    again = batchor_cli(workdir, "apply", spec, "--max-cost", "1")
    assert again.returncode == 3, again.stderr  # both rows still failed
    assert "1 failed earlier, not retried" in again.stderr
    assert _sent(fake) == {"500": 2}  # the transient failure is tried again, the 400 is not sent

    fake.reset()
    retried = batchor_cli(workdir, "apply", spec, "--max-cost", "1", "--retry-failed")
    assert retried.returncode == 3, retried.stderr
    assert _sent(fake) == {"400": 1, "500": 2}

    fake.reset()
    fake.configure(fail_matching={})  # fixed upstream: --refresh STEP sends every request of the step
    refreshed = batchor_cli(workdir, "apply", spec, "--max-cost", "1", "--refresh", "classify")
    assert refreshed.returncode == 0, refreshed.stderr
    assert _sent(fake) == {"200": 6}


def _chain(folder) -> str:
    write_csv(folder / "data.csv", [{"id": f"t{i}", "text": f"ticket {i}"} for i in range(6)])
    spec = {
        "name": "chain",
        "input": {"path": "data.csv", "key": "id"},
        "model": {"provider": "openai", "name": "gpt-4.1-mini", "params": {"max_tokens": 30}},
        "steps": {
            "first": {"prompt": "First {{ row.text }}"},
            "second": {"prompt": "Second {{ row.text }}: {{ first }}"},
            "third": {"prompt": "Third {{ second }}"},
        },
        "output": {"path": "out.parquet"},
        "limits": {"concurrency": 2},
    }
    (folder / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(folder / "spec.yaml")


@pytest.mark.parametrize("pipeline", [True, False])
def test_a_dependent_step_that_failed_for_good_is_not_sent_again(workdir, fake, pipeline, batchor_cli):
    spec = _chain(workdir)
    fake.configure(fail_matching={"Second ticket 2:": 400})
    limits = {"pipeline": pipeline}
    assert batchor.apply(spec, max_cost=1, limits=limits).failed == 1
    assert _sent(fake) == {"200": 6 + 5 + 5, "400": 1}  # `third` skips the failed row

    fake.reset()
    plan = batchor.plan(spec)
    assert plan.steps["second"]["failed_earlier"] == 1 and plan.steps["second"]["to_run"] == 0
    assert plan.steps["third"]["to_run"] == 0
    again = batchor.apply(spec, max_cost=1, limits=limits)
    assert fake.stats()["requests"] == 0 and again.succeeded == 0

    retried = batchor.apply(spec, max_cost=1, limits=limits, retry_failed=True)
    assert _sent(fake) == {"400": 1} and retried.failed == 1


def test_a_run_keeps_its_failures_in_history_after_a_later_run_answers_them(workdir, fake):
    """`runs` and `status` of an earlier partial run still count the requests that failed in it
    once a later --retry-failed run answers them (the later run owns the stored result now)."""
    from batchor import operations

    spec = make_spec(workdir, rows=6, limits={"concurrency": 2, "max_attempts": 1})
    fake.configure(fail_matching={"review number 3": 400})
    first = batchor.apply(spec, max_cost=1)
    assert (first.status, first.succeeded, first.failed) == ("partial", 5, 1)

    fake.configure(fail_matching={})
    assert batchor.apply(spec, max_cost=1, retry_failed=True).status == "succeeded"
    earlier = next(r for r in operations.runs() if r["run_id"] == first.run_id)
    assert (earlier["status"], earlier["succeeded"], earlier["failed"]) == ("partial", 5, 1)
    shown = operations.status(first.run_id)
    assert (shown["succeeded"], shown["failed"]) == (5, 1)
