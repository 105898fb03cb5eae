"""Anthropic's batches carry no tag of ours, so an uncertain create is looked up by size and time
alone, and another job's batch of the same size made in the same minutes looks the same. Such a
batch is adopted only once its results carry the intent's request keys: another job's is not
stored, not cancelled, and the intent is looked up again, so our own batch is still found and
nothing is paid twice. Real anthropic SDK against the fake; two jobs in two folders."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from batchor import api
from tests.engine.batch_helpers import state_rows, submitted
from tests.engine.test_batch_providers import spec_for

pytestmark = pytest.mark.timeout(120)


def other_job(folder: Path) -> Path:
    """Another job: the same size of batch, other requests (another prompt)."""
    spec = spec_for(folder, "anthropic", rows=4)
    data = yaml.safe_load(spec.read_text())
    data["steps"]["classify"]["prompt"] = "Another job's review: {{ row.text }}"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    return spec


@pytest.mark.slow  # about 3 s: a create answered after the client's timeout, looked up twice
def test_another_jobs_same_size_batch_is_not_adopted(fake, tmp_path):
    fake.reset(config=True, batches=True)
    theirs, ours = tmp_path / "theirs", tmp_path / "ours"
    theirs.mkdir(), ours.mkdir()
    other = api.apply(str(other_job(theirs)), handle_signals=False)  # a 4-request batch, seconds ago
    assert other.succeeded == 4
    (their_batch,) = [r for (r,) in state_rows(theirs, "SELECT remote_id FROM batches")]
    # Our create is answered after the client's timeout, and our batch shows in listings only after
    # the first lookup: that lookup sees only their batch, of our size, inside the time window.
    fake.configure(batch_create_delay_s=1.2, batch_create_hidden=True, batch_create_hidden_lists=1)
    events: list = []
    spec = spec_for(ours, "anthropic", rows=4, request_timeout_s=0.5)
    result = api.apply(str(spec), on_event=events.append, handle_signals=False)
    assert (result.status, result.succeeded) == ("succeeded", 4)
    refused = [e.data for e in events if e.type == "batch_not_ours"]
    assert [r["remote_id"] for r in refused] == [their_batch]
    mine = set(state_rows(ours, "SELECT request_key FROM job_requests"))
    sent = submitted(fake)
    assert {k: n for k, n in sent.items() if (k,) in mine} == {k: 1 for (k,) in mine}  # our batch, found, once
    assert fake.stats()["batch_states"][their_batch] != "cancelled"
    kept = state_rows(ours, f"SELECT state, error FROM batches WHERE remote_id = '{their_batch}'")
    assert len(kept) == 1 and kept[0][0] == "collected" and "not adopted" in kept[0][1]
    # their answers were not stored as ours
    assert state_rows(ours, "SELECT count(*) FROM results") == [(4,)]
