"""Fallback models and escalation in batch mode (engine/other_models.py): once a batch step's own
batches are collected, the rows one model failed go to the next model, and the rows whose answer
asks for it go to the stronger model, as a wave of that model (a batch of its provider, or
realtime for a small `auto` wave), through the real openai and anthropic SDKs against the fake."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from conftest import make_spec

from batchor import api
from tests.engine.batch_helpers import FAST, state_rows, submitted

pytestmark = pytest.mark.timeout(600)  # the kill test runs three CLI processes

PRIMARY, BACKUP, STRONG = "gpt-4.1-mini", "claude-haiku-4-5", "gpt-4.1"
SCHEMA = {
    "type": "object",
    "properties": {"sentiment": {"type": "string"}, "confidence": {"type": "number", "minimum": 0, "maximum": 1}},
    "required": ["sentiment", "confidence"],
}


def spec_of(workdir: Path, rows: int = 8, step: dict | None = None, **limits: object) -> Path:
    path = make_spec(workdir, rows=rows, output={"path": "out/results.parquet"}, limits={**FAST, **limits})
    spec = yaml.safe_load(path.read_text())
    spec["model"] = {
        "provider": "openai",
        "name": PRIMARY,
        "params": {"temperature": 0, "max_tokens": 50},
        "fallback": [f"anthropic:{BACKUP}"],
    }
    spec["steps"]["classify"].update(step or {})
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def outputs(workdir: Path) -> dict[str, dict]:
    return {r["id"]: r for r in pq.read_table(workdir / "out" / "results.parquet").to_pylist()}


def spend_by_model(workdir: Path) -> dict[str, float]:
    return dict(state_rows(workdir, "SELECT model, sum(cost_usd) FROM attempts GROUP BY model"))


def test_rows_a_batch_fails_go_to_the_fallback_model_in_a_batch(workdir, fake):
    fake.configure(fail_model={PRIMARY: {"review number 1": "malformed", "review number 5": "malformed"}})
    spec = spec_of(workdir, max_attempts=2)
    outcome = api.apply(str(spec), handle_signals=False)
    assert (outcome.status, outcome.succeeded, outcome.failed) == ("succeeded", 8, 0)
    rows = outputs(workdir)
    moved = {k: r["_model"] for k, r in rows.items() if r["_model"] != f"openai:{PRIMARY}"}
    assert moved == {"r1": f"anthropic:{BACKUP}", "r5": f"anthropic:{BACKUP}"}
    # the two fallback requests went in an Anthropic batch, each once; nothing realtime
    created = Counter(p for (p,) in state_rows(workdir, "SELECT provider FROM batches"))
    assert created["anthropic"] == 1 and fake.stats()["requests"] == 0
    sent = submitted(fake)
    assert sorted(sent.values()) == [1] * 8 + [2, 2]  # 8 own requests (r1, r5 re-asked once), 2 fallback ones
    links = state_rows(workdir, "SELECT count(*) FROM results WHERE answered_by IS NOT NULL AND status = 'failed'")
    assert links == [(2,)]
    spend = spend_by_model(workdir)
    assert set(spend) == {f"openai:{PRIMARY}", f"anthropic:{BACKUP}"} and spend[f"anthropic:{BACKUP}"] > 0
    assert sum(spend.values()) == pytest.approx(outcome.cost_usd)
    asked = (fake.stats()["batches_created"], fake.stats()["requests"])
    again = api.apply(str(spec), handle_signals=False)  # nothing is asked again, of either model
    assert (fake.stats()["batches_created"], fake.stats()["requests"]) == asked
    assert (again.status, again.cost_usd) == ("succeeded", 0) and len(outputs(workdir)) == 8


def test_a_small_auto_wave_goes_realtime(workdir, fake):
    """`mode: auto` settled on batch; the two rows that fall back are under `batch_threshold`."""
    fake.configure(fail_model={PRIMARY: {"review number 2": 503}})
    spec = spec_of(workdir, mode="auto", batch_threshold=5, max_attempts=1)
    plan = api.plan(str(spec), save=False)
    assert plan.header.steps[0].mode == "batch"
    outcome = api.apply(str(spec), handle_signals=False)
    assert (outcome.status, outcome.succeeded) == ("succeeded", 8)
    assert outputs(workdir)["r2"]["_model"] == f"anthropic:{BACKUP}"
    assert [p for (p,) in state_rows(workdir, "SELECT provider FROM batches")] == ["openai"]
    assert fake.stats()["requests"] == 1  # the one row, realtime


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_escalate_sends_the_unsure_rows_to_the_stronger_model_as_a_second_batch(workdir, fake):
    step = {"output": {"schema": SCHEMA}, "escalate": {"to": f"openai:{STRONG}", "when": "classify.confidence < 0.5"}}
    spec = spec_of(workdir, rows=12, step=step)
    outcome = api.apply(str(spec), handle_signals=False)
    assert (outcome.status, outcome.succeeded) == ("succeeded", 12)
    cheap = dict(state_rows(workdir, f"SELECT request_key, output FROM results WHERE model = 'openai:{PRIMARY}'"))
    unsure = {k for k, out in cheap.items() if yaml.safe_load(out)["confidence"] < 0.5}
    assert 0 < len(unsure) < 12, "the fake's confidences should split the rows"
    rows = outputs(workdir)
    assert Counter(r["_model"] for r in rows.values()) == {
        f"openai:{STRONG}": len(unsure),
        f"openai:{PRIMARY}": 12 - len(unsure),
    }
    strong = state_rows(workdir, f"SELECT count(*) FROM batches WHERE model = '{STRONG}'")
    assert strong == [(1,)]  # one second wave, in a batch
    linked = state_rows(workdir, "SELECT request_key FROM results WHERE answered_by IS NOT NULL")
    assert {k for (k,) in linked} == unsure
    assert sum(spend_by_model(workdir).values()) == pytest.approx(outcome.cost_usd)
    asked = (fake.stats()["batches_created"], fake.stats()["requests"])
    again = api.apply(str(spec), handle_signals=False)
    assert (fake.stats()["batches_created"], fake.stats()["requests"]) == asked
    assert (again.status, again.cost_usd) == ("succeeded", 0)


def test_a_row_out_of_quota_goes_to_the_fallback_model(workdir, fake):
    """A batch row answered with the provider's quota error moves on, as in realtime, instead of
    pausing the run with the row pending."""
    fake.configure(fail_model={PRIMARY: {"review number 3": "quota"}})
    outcome = api.apply(str(spec_of(workdir, rows=6)), handle_signals=False)
    assert (outcome.status, outcome.succeeded, outcome.failed) == ("succeeded", 6, 0), outcome.stop_reason
    assert {k for k, r in outputs(workdir).items() if r["_model"] == f"anthropic:{BACKUP}"} == {"r3"}
    failed = state_rows(workdir, "SELECT error_code FROM results WHERE answered_by IS NOT NULL")
    assert failed == [("quota_exhausted",)]


def test_a_batch_create_out_of_quota_sends_every_row_to_the_fallback_model(workdir, fake):
    """The step's provider refuses the batch for quota: no row is sent to it again; the fallback
    model's batch answers all of them."""
    fake.configure(batch_create_quota=["openai"])
    spec = spec_of(workdir, rows=5)
    outcome = api.apply(str(spec), handle_signals=False)
    assert (outcome.status, outcome.succeeded, outcome.failed) == ("succeeded", 5, 0), outcome.stop_reason
    assert {r["_model"] for r in outputs(workdir).values()} == {f"anthropic:{BACKUP}"}
    assert [p for (p,) in state_rows(workdir, "SELECT provider FROM batches WHERE remote_id IS NOT NULL")] == [
        "anthropic"
    ]
    fake.configure(batch_create_quota=[])  # a second apply asks the primary for nothing either
    again = api.apply(str(spec), handle_signals=False)
    assert (again.status, again.cost_usd) == ("succeeded", 0) and fake.stats()["batches_created"] == 1


def test_quota_without_it_in_fallback_on_still_pauses(workdir, fake):
    fake.configure(batch_create_quota=["openai"])
    spec = spec_of(workdir, rows=3)
    spec.write_text(spec.read_text().replace("fallback:", "fallback_on: [invalid_output]\n  fallback:"))
    outcome = api.apply(str(spec), handle_signals=False)
    assert outcome.status == "paused" and "quota" in (outcome.stop_reason or "")
    assert fake.stats()["batches_created"] == 0


@pytest.mark.slow  # three CLI processes, one killed
@pytest.mark.parametrize("point", ["after_intent", "after_submit"])  # the own batch is submitted already
def test_a_kill_in_the_fallback_wave_resumes_without_paying_twice(workdir, fake, point):
    """The own batch goes out with `--no-wait`; the next apply collects it, finds two rows failed and
    is killed in the fallback model's batch; a third apply re-attaches to (or reconciles) that batch
    and links its answers: each request is sent once, every row is answered."""
    from batchor.errors import EXIT_IN_FLIGHT
    from tests.engine.batch_helpers import cli

    # Forget earlier tests' batches: an Anthropic create is reconciled by size and time alone, and
    # another test's 2-request batch made in the last two minutes would be taken for ours.
    fake.reset(config=True, batches=True)
    fake.configure(fail_model={PRIMARY: {"review number 1": "blocked", "review number 5": "blocked"}})  # refused
    spec = spec_of(workdir, max_attempts=2)
    first = cli(workdir, "apply", spec, "--yes", "--no-wait")
    assert first.returncode == EXIT_IN_FLIGHT, first.stderr
    killed = cli(workdir, "apply", spec, "--yes", crash_at=point)
    assert killed.returncode == -9, killed.stderr
    assert [p for (p,) in state_rows(workdir, "SELECT provider FROM batches ORDER BY created_at")] == [
        "openai",
        "anthropic",
    ]
    done = cli(workdir, "apply", spec, "--yes")
    assert done.returncode == 0, done.stderr
    rows = outputs(workdir)
    assert {r["_status"] for r in rows.values()} == {"succeeded"} and len(rows) == 8
    assert {k for k, r in rows.items() if r["_model"] == f"anthropic:{BACKUP}"} == {"r1", "r5"}
    assert len(submitted(fake)) == 10 and set(submitted(fake).values()) == {1}, submitted(fake)
    spend = spend_by_model(workdir)
    billed = state_rows(workdir, "SELECT sum(cost_usd) FROM attempts")[0][0]
    assert sum(spend.values()) == pytest.approx(billed) and spend[f"anthropic:{BACKUP}"] > 0
