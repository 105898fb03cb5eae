"""Polling in the batch engine, per batch: a round polls only the batches due (an old batch is not
polled at the pace of a young one), and a batch like earlier ones of the state gets a poll at the
end their durations point to. On the fake's Batch API through the openai SDK, the engine's sleeps
on an injected clock."""

from __future__ import annotations

import signal

import duckdb
import pytest

from batchor import api
from batchor.engine.run import ApplyOptions, apply_plan
from batchor.state import open_state
from tests.engine.batch_helpers import batch_spec, cli, submitted

pytestmark = pytest.mark.timeout(120)


class FakeTime:
    """An epoch clock advanced only by the engine's own (injected) sleeps."""

    def __init__(self, now: float = 1.8e9) -> None:
        self.now, self.delays = now, []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.delays.append(round(seconds, 3))
        self.now += seconds


def apply_on(folder, spec, time: FakeTime | None = None, **options):
    events: list = []
    clocks = {"sleep": time.sleep, "clock": time.clock} if time else {}
    outcome = apply_plan(
        api.plan(str(spec), save=False),
        open_state(str(folder / ".batchor" / "state.duckdb")),
        ApplyOptions(handle_signals=False, emit=events.append, **{**clocks, **options}),
    )
    return outcome, events


def test_an_old_batch_is_not_polled_at_the_pace_of_a_young_one(fake, workdir):
    fake.configure(batch_polls=12)
    first, _ = apply_on(workdir, batch_spec(workdir, rows=3, batch_poll_s=5), wait=False)
    assert first.status == "in_flight"
    old = FakeTime(now=1.8e9 + 3600)  # the earlier batch is an hour old on this clock
    outcome, events = apply_on(workdir, batch_spec(workdir, rows=6, batch_poll_s=5, batch_poll_max_s=60), old)
    assert (outcome.status, outcome.progress["succeeded"]) == ("succeeded", 6)
    submitted = next(e.data["batch_id"] for e in events if e.type == "batch_submitted")
    polled = [e.data["batch_id"] for e in events if e.type in ("batch_polled", "batch_collected")]
    young_done = max(i for i, batch in enumerate(polled) if batch == submitted)
    old_polls = [b for b in polled[:young_done] if b != submitted]
    assert polled.count(submitted) == 12  # the fake ends a batch at its 12th status read
    assert len(old_polls) <= 2  # at once (it may be done), then by its age: 60 s away
    assert old.delays[0] == 0.0


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_a_batch_like_earlier_ones_is_polled_when_their_durations_say_it_ends(fake, workdir):
    def ages(folder, history_s: float | None) -> list[float]:
        fake.configure(batch_polls=1)
        done, _ = apply_on(folder, batch_spec(folder, rows=4, batch_poll_s=5, batch_poll_max_s=600))
        assert done.status == "succeeded"
        db = duckdb.connect(str(folder / ".batchor" / "state.duckdb"))
        if history_s is not None:  # the earlier batch took `history_s` from its submit to its end
            db.execute(f"UPDATE batches SET submitted_at = ended_at - INTERVAL {int(history_s)} SECOND")
        else:
            db.execute("DELETE FROM batches")  # no history
        db.close()
        fake.configure(batch_polls=25)
        spec = batch_spec(folder, rows=4, batch_poll_s=5, batch_poll_max_s=600)
        spec.write_text(spec.read_text().replace("Review:", "Review again:"))  # four new requests
        time = FakeTime()
        outcome, _ = apply_on(folder, spec, time)
        assert (outcome.status, outcome.progress["succeeded"]) == ("succeeded", 4)
        return [round(sum(time.delays[: i + 1]), 3) for i in range(len(time.delays))]

    (workdir / "history").mkdir()
    (workdir / "none").mkdir()
    with_history, without = ages(workdir / "history", 40.0), ages(workdir / "none", None)
    assert 40.0 in with_history and 40.0 not in without  # a poll at the expected end
    assert with_history[:5] == without[:5] == [0.5, 1.0, 1.5, 2.0, 2.5]  # short at first either way


@pytest.mark.slow  # a process killed after its intent, then a resume
def test_an_earlier_intent_whose_lookup_fails_waits_between_rounds(fake, workdir):
    """An intent left by a killed apply is reconciled (looked up), not polled: while its lookup
    fails, rounds wait by the intent's age instead of following one another at once."""
    spec = batch_spec(workdir, rows=3, max_attempts=4)
    killed = cli(workdir, "apply", spec, "--yes", crash_at="after_intent")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    fake.configure(fault_plan={"openai.batches.list": ["400", "400"]})  # refused twice, then answered
    paper = FakeTime()
    outcome, events = apply_on(workdir, spec, None, sleep=paper.sleep)
    assert (outcome.status, outcome.progress["succeeded"]) == ("succeeded", 3)
    failed = [e for e in events if e.type == "batch_call_failed"]
    assert len(failed) == 2
    assert all(delay > 0 for delay in paper.delays[:2]), paper.delays  # not a round after a round at once
    assert set(submitted(fake).values()) == {1}
