"""A batch create answered after the client's timeout, by a server that shows the batch only once
it answers: batchor looks it up after a wait longer than the timeout, and once more at the end of
the run before its rows are sent again, so the batch is collected and never paid twice."""

from __future__ import annotations

import pytest

from batchor import api
from tests.engine.batch_helpers import state_rows, submitted
from tests.engine.test_batch_providers import MODELS, aws_at_the_fake, spec_for  # noqa: F401 - autouse fixture

pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize("provider", list(MODELS))
def test_a_create_that_shows_late_is_found_and_collected_not_created_again(fake, workdir, provider):
    fake.reset(config=True, batches=True)  # Anthropic's lookup matches by content: no earlier test's batch
    fake.configure(batch_create_delay_s=1.8, batch_create_hidden=True)  # found from 1.8 s on
    spec = spec_for(workdir, provider, rows=5, request_timeout_s=0.5)  # looked up at ~1.5 s, then ~2.5 s
    events: list[str] = []
    result = api.apply(str(spec), on_event=lambda e: events.append(e.type), handle_signals=False)
    assert result.succeeded == 5
    assert "batch_create_failed" in events and "batch_reattached" in events
    assert fake.stats()["batches_created"] == 1 and set(submitted(fake).values()) == {1}


@pytest.mark.parametrize(
    "provider", [p if p == "openai" else pytest.param(p, marks=pytest.mark.slow) for p in MODELS]
)  # about 3 s each: one provider in the default tier
def test_a_create_that_shows_after_both_lookups_is_cancelled_and_collected(fake, workdir, provider):
    """Issue 35: the first create shows only after both lookups gave it up (its rows already sent
    again in a second batch). Found while the second batch runs, it is cancelled (unless found by
    size and time only) and collected: never left running, paid for and unread."""
    fake.reset(config=True, batches=True)  # Anthropic's lookup matches by content: no earlier test's batch
    fake.configure(
        batch_create_delay_s=1.5,
        batch_create_hidden=True,
        batch_create_hidden_lists=2,  # both lookups miss it, however late a loaded machine makes them
        batch_create_late_count=1,
        batch_seconds=2.0,
    )  # looked up at ~0.6 s and ~1.0 s; it shows at 1.5 s; the second batch ends at ~3 s
    spec = spec_for(workdir, provider, rows=5, request_timeout_s=0.2)
    events: list = []
    result = api.apply(str(spec), on_event=events.append, handle_signals=False)
    assert result.succeeded == 5
    (found,) = [e.data for e in events if e.type == "batch_found_late"]
    # Anthropic's batch is found by size and time only: it may be another job's, so it is never
    # cancelled (test_batch_not_ours.py); it is collected as it ends
    ended = "completed" if provider == "anthropic" else "cancelled"
    assert fake.stats()["batch_states"][found["remote_id"]] == ended
    collected = [e.data for e in events if e.type == "batch_collected" and e.data["batch_id"] == found["batch_id"]]
    assert len(collected) == 1 and collected[0]["state"] == ended
    assert state_rows(workdir, f"SELECT state FROM batches WHERE batch_id = '{found['batch_id']}'") == [("collected",)]
    assert fake.stats()["batches_created"] == 2 and set(submitted(fake).values()) == {2}
    # the late batch answered before its cancel: billed, so this run's spend (what the run reports
    # and the budget holds) counts it next to the batch its rows were sent again in
    ((paid,),) = state_rows(workdir, "SELECT sum(cost_usd) FROM attempts")
    late_paid = [e.data for e in events if e.type == "batch_collected"]
    assert collected[0]["outcomes"] == {"ok": 5} and len(late_paid) == 2
    assert result.cost_usd == pytest.approx(paid) and paid > 0
