"""Batch mode in one process, through the real openai SDK against the fake Batch API:
splitting at the limits, per-row error handling, expiry, quota pause, polling backoff."""

from __future__ import annotations

import time

import pytest
import yaml

import batchor
from batchor import api
from batchor.engine.run import ApplyOptions, apply_plan
from batchor.state import open_state
from tests.engine.batch_helpers import (
    FAST,
    batch_spec,
    batches,
    key_of,
    results,
    submitted,
    switch_after_first_collect,
)
from tests.providers.helpers import provider_spec

pytestmark = pytest.mark.timeout(120)


def test_splits_at_request_and_byte_limits_without_duplicates(fake, workdir):
    spec = batch_spec(workdir, rows=25, batch_max_requests=10)
    result = api.apply(str(spec))
    assert (result.status, result.succeeded) == ("succeeded", 25)
    assert [b[1] for b in batches(workdir)] == [10, 10, 5]
    counts = submitted(fake)
    assert len(counts) == 25 and set(counts.values()) == {1}

    spec = batch_spec(workdir / "bytes", rows=12, batch_max_bytes=2048)
    result = api.apply(str(spec), state=str(workdir / "bytes.duckdb"))
    assert result.succeeded == 12 and fake.stats()["batches_created"] > 4


def test_plan_prices_batch_steps_at_the_batch_rate(fake, workdir):
    spec = batch_spec(workdir, rows=30)
    batch = api.plan(str(spec), save=False)
    realtime = api.plan(str(spec), mode="realtime", save=False)
    step = batch.header.steps[0]
    assert step.mode == "batch"
    assert batch.header.totals.cost_expected == pytest.approx(realtime.header.totals.cost_expected / 2)
    auto_small = api.plan(str(batch_spec(workdir / "a", rows=30, mode="auto", batch_threshold=31)), save=False)
    auto_big = api.plan(str(batch_spec(workdir / "b", rows=30, mode="auto", batch_threshold=30)), save=False)
    assert auto_small.header.steps[0].mode == "realtime" and "batch_threshold" in auto_small.header.steps[0].mode_note
    assert auto_big.header.steps[0].mode == "batch"
    rushed = api.plan(
        str(batch_spec(workdir / "c", rows=30, mode="auto", batch_threshold=1, deadline="2h")), save=False
    )
    assert rushed.header.steps[0].mode == "realtime" and "deadline" in rushed.header.steps[0].mode_note


def test_row_errors_400_fails_at_once_429_and_500_come_back_in_a_later_batch(fake, workdir):
    fake.configure(fail_matching={"review number 1": 400, "review number 2": 429, "review number 3": 500})
    spec = batch_spec(workdir, rows=10)
    result = api.apply(str(spec), on_event=switch_after_first_collect(fake, fail_matching={}))
    assert (result.succeeded, result.failed) == (9, 1)
    counts, stored = submitted(fake), results(workdir)
    k1, k2, k3, k4 = (key_of(workdir, f"r{i}") for i in (1, 2, 3, 4))
    assert (counts[k1], counts[k2], counts[k3], counts[k4]) == (1, 2, 2, 1)
    assert stored[k1] == ("failed", "invalid_request", 1)
    assert stored[k2][:2] == ("succeeded", None) and stored[k2][2] == 1  # a 429 uses no attempt
    assert stored[k3][:2] == ("succeeded", None) and stored[k3][2] == 2


def test_persistent_5xx_and_invalid_output_fail_after_max_attempts(fake, workdir):
    fake.configure(fail_matching={"review number 3": 500, "review number 4": "malformed"})
    spec = batch_spec(workdir, rows=6, max_attempts=2)
    result = api.apply(str(spec))
    assert (result.succeeded, result.failed) == (4, 2)
    counts, stored = submitted(fake), results(workdir)
    k3, k4 = key_of(workdir, "r3"), key_of(workdir, "r4")
    assert counts[k3] == counts[k4] == 2
    assert stored[k3][1:] == ("provider_unavailable", 2)
    assert stored[k4][1:] == ("invalid_output", 2)


def test_expired_batch_keeps_its_answers_and_resubmits_only_the_rest(fake, workdir):
    fake.configure(batch_end="expired", batch_done_fraction=0.5)
    spec = batch_spec(workdir, rows=10)
    result = api.apply(str(spec), on_event=switch_after_first_collect(fake, batch_end="completed"))
    assert (result.status, result.succeeded) == ("succeeded", 10)
    counts = submitted(fake)
    assert sorted(counts.values()) == [1] * 5 + [2] * 5  # only the unanswered half went again
    first = batches(workdir)[0]
    assert first[2:5] == (5, 0, 5)  # succeeded, failed, requeued


def test_quota_pauses_the_run_and_a_later_apply_continues(fake, workdir):
    fake.configure(fail_matching={"review number 5": "quota"})
    spec = batch_spec(workdir, rows=8, batch_max_requests=4)
    paused = api.apply(str(spec))
    assert paused.status == "paused" and "quota" in (paused.stop_reason or "")
    status = batchor.status()
    assert status["status"] == "paused" and "quota" in status["paused_reason"]
    assert all(b["state"] == "collected" for b in status["batches"])
    fake.configure(fail_matching={})
    resumed = api.apply(str(spec))
    assert resumed.status == "succeeded" and resumed.succeeded >= 1
    counts = submitted(fake)
    assert counts[key_of(workdir, "r5")] == 2 and all(n == 1 for k, n in counts.items() if k != key_of(workdir, "r5"))


def test_quota_on_create_pauses_before_anything_is_sent(fake, workdir):
    fake.configure(quota_exhausted=True)
    spec = batch_spec(workdir, rows=5)
    paused = api.apply(str(spec))
    assert paused.status == "paused" and fake.stats()["batches_created"] == 0
    fake.configure(quota_exhausted=False)
    assert api.apply(str(spec)).succeeded == 5
    assert set(submitted(fake).values()) == {1}


def test_enqueued_token_budget_holds_chunks_until_room(fake, workdir):
    spec = batch_spec(workdir, rows=9, batch_max_requests=3, batch_enqueued_tokens=1)
    seen = []
    result = api.apply(str(spec), on_event=lambda e: seen.append(e.type))
    assert result.succeeded == 9
    live, most = 0, 0
    for kind in seen:
        live += {"batch_submitted": 1, "batch_collected": -1}.get(kind, 0)
        most = max(most, live)
    assert most == 1 and seen.count("batch_submitted") == 9  # one row's tokens fill the budget


class FakeTime:
    """An epoch clock advanced only by the engine's own (injected) sleeps."""

    def __init__(self) -> None:
        self.now, self.delays = 1.8e9, []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.delays.append(round(seconds, 3))
        self.now += seconds


def polled(fake, workdir, rows: int = 3, **limits) -> tuple[list[float], list]:
    """Apply a batch spec on the fake clock: the waits between polling rounds, and the events."""
    spec = batch_spec(workdir, rows=rows, **{"batch_poll_s": 5, "batch_poll_max_s": 60, **limits})
    time, events = FakeTime(), []
    outcome = apply_plan(
        api.plan(str(spec), save=False),
        open_state(str(workdir / ".batchor" / "state.duckdb")),
        ApplyOptions(sleep=time.sleep, clock=time.clock, handle_signals=False, emit=events.append),
    )
    assert outcome.status == "succeeded" and outcome.progress["succeeded"] == rows
    return time.delays, events


def test_polling_follows_the_batch_age_and_takes_no_real_time(fake, workdir):
    """First poll 0.5 s after the submit, then a quarter of the batch's age, up to batch_poll_max_s."""
    fake.configure(batch_polls=30)
    delays, _ = polled(fake, workdir)
    assert delays[:8] == [0.5, 0.5, 0.5, 0.5, 0.5, 0.625, 0.781, 0.977]
    assert delays[-1] == 60 and max(delays) == 60
    assert fake.stats()["by_endpoint"] == {}  # no realtime calls


def test_a_batch_done_at_its_first_poll_is_collected_in_that_round(fake, workdir):
    fake.configure(batch_polls=1)
    delays, events = polled(fake, workdir)
    assert delays == [0.5]
    assert [e.type for e in events if e.type.startswith("batch_") and e.type != "batch_step"] == [
        "batch_submitted",
        "batch_waiting",
        "batch_collected",
    ]


class SlowUploadTime(FakeTime):
    """Real time passes during calls (a slow create), the engine's sleeps only on paper."""

    def clock(self) -> float:
        return self.now + time.time()


def test_the_first_poll_counts_from_the_create_not_from_a_slow_upload_before_it(fake, workdir):
    fake.configure(batch_polls=1, batch_create_delay_s=2.2)  # a quarter of 2.2 s is more than 0.5 s
    spec = batch_spec(workdir, rows=3, batch_poll_s=5, batch_poll_max_s=60)
    clock = SlowUploadTime()
    clock.now = 0.0
    outcome = apply_plan(
        api.plan(str(spec), save=False),
        open_state(str(workdir / ".batchor" / "state.duckdb")),
        ApplyOptions(sleep=clock.sleep, clock=clock.clock, handle_signals=False),
    )
    assert outcome.status == "succeeded"
    assert len(clock.delays) == 1 and 0 < clock.delays[0] <= 0.5  # due 0.5 s after the create returned


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_reported_progress_brings_the_next_poll_forward(fake, workdir, provider):
    """A batch whose request counts say it is nearly done is polled before its age says so
    (never sooner than a sixteenth of its age); while the counts are far from done, polls follow the age."""
    model = {"openai": "gpt-4.1-mini", "anthropic": "claude-haiku-4-5"}[provider]

    def run(folder, progress: bool) -> list[float]:
        folder.mkdir()
        fake.configure(batch_polls=40, batch_progress=progress)
        spec = provider_spec(folder, provider, model, rows=40)
        data = yaml.safe_load(spec.read_text(encoding="utf-8"))
        data["limits"].update(FAST, batch_poll_s=5, batch_poll_max_s=86400)  # no cap: the age rule alone
        spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        time = FakeTime()
        outcome = apply_plan(
            api.plan(str(spec), save=False),
            open_state(str(folder / "state.duckdb")),
            ApplyOptions(sleep=time.sleep, clock=time.clock, handle_signals=False),
        )
        assert (outcome.status, outcome.progress["succeeded"]) == ("succeeded", 40)
        return time.delays

    by_age, by_progress = run(workdir / "age", False), run(workdir / "progress", True)
    assert len(by_age) == len(by_progress) == 40  # the fake ends each at its 40th status read
    assert by_progress[:33] == by_age[:33]  # up to 80 % done (32 of 40 rows): the age rule is as soon
    assert all(p < a for p, a in zip(by_progress[33:], by_age[33:]))
    ages = [sum(by_progress[:i]) for i in range(len(by_progress))]
    assert all(wait >= max(0.5, age / 16) - 1e-3 for wait, age in zip(by_progress, ages))


def test_an_apply_collecting_earlier_batches_polls_at_once(fake, workdir):
    fake.configure(batch_polls=1)
    spec = batch_spec(workdir, rows=3, batch_poll_s=5)
    state = str(workdir / ".batchor" / "state.duckdb")
    submitted = apply_plan(
        api.plan(str(spec), save=False), open_state(state), ApplyOptions(wait=False, handle_signals=False)
    )
    assert submitted.status == "in_flight"
    time = FakeTime()
    collected = apply_plan(
        api.plan(str(spec), save=False),
        open_state(state),
        ApplyOptions(sleep=time.sleep, clock=time.clock, handle_signals=False),
    )
    assert collected.status == "succeeded"
    assert time.delays[0] == 0.0


def test_mode_override_from_the_command_line(fake, workdir):
    spec = batch_spec(workdir, rows=4, mode="realtime")
    result = api.apply(str(spec), mode="batch")
    assert result.succeeded == 4 and fake.stats()["batches_created"] == 1


def test_batch_failed_as_a_whole_by_validation_fails_its_rows_once(fake, workdir):
    fake.configure(batch_end="failed")
    spec = batch_spec(workdir, rows=3, max_attempts=2)
    result = api.apply(str(spec))
    assert result.failed == 3 and fake.stats()["batches_created"] == 1  # a 4xx: not retried
    assert {v[1] for v in results(workdir).values()} == {"invalid_request"}
