"""A batch create answered after the client's timeout, by a server that shows the batch only once
it answers: batchor looks it up after a wait longer than the timeout, and once more at the end of
the run before its rows are sent again, so the batch is collected and never paid twice."""

from __future__ import annotations

import pytest

from batchor import api
from tests.engine.batch_helpers import submitted
from tests.engine.test_batch_providers import MODELS, spec_for

pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize("provider", list(MODELS))
def test_a_create_that_shows_late_is_found_and_collected_not_created_again(fake, workdir, provider):
    fake.configure(batch_create_delay_s=1.8, batch_create_hidden=True)  # found from 1.8 s on
    spec = spec_for(workdir, provider, rows=5, request_timeout_s=0.5)  # looked up at ~1.5 s, then ~2.5 s
    events: list[str] = []
    result = api.apply(str(spec), on_event=lambda e: events.append(e.type), handle_signals=False)
    assert result.succeeded == 5
    assert "batch_create_failed" in events and "batch_reattached" in events
    assert fake.stats()["batches_created"] == 1 and set(submitted(fake).values()) == {1}
