"""A collected batch's provider files are read and deleted side by side: against a real provider
each of those calls is a round trip (hundreds of milliseconds), and a batch has up to three files."""

from __future__ import annotations

import pytest

from batchor import api
from tests.engine.batch_helpers import batch_spec, results

pytestmark = pytest.mark.timeout(120)


def test_a_collected_batch_downloads_and_deletes_its_files_side_by_side(fake, workdir):
    fake.configure(
        fail_matching={"review number 1": 400},  # an error file beside the output file
        fault_plan={"openai.files.content": ["slow", "slow"], "openai.files.delete": ["slow"] * 3},
    )
    result = api.apply(str(batch_spec(workdir, rows=6)), progress=False)
    assert (result.succeeded, result.failed) == (5, 1)
    stats = fake.stats()
    assert stats["endpoint_calls"]["openai.files.content"] == 2 and stats["endpoint_calls"]["openai.files.delete"] == 3
    assert stats["endpoint_max_in_flight"]["openai.files.content"] == 2  # one after the other: 1
    assert stats["endpoint_max_in_flight"]["openai.files.delete"] == 3


@pytest.mark.slow  # six tries of one call, with real backoff waits
def test_a_download_that_keeps_failing_leaves_the_batch_to_a_later_round(fake, workdir):
    """The error file's download fails (after its retries) while the output file's succeeds: no row
    is settled from half a batch; the next round reads both again and stores every row once."""
    fake.configure(
        fail_matching={"review number 1": 400},
        fault_plan={"openai.files.content": ["ok", "500", "500", "500", "500", "500", "500"]},
    )
    result = api.apply(str(batch_spec(workdir, rows=6)), progress=False)
    assert (result.succeeded, result.failed) == (5, 1)
    assert fake.stats()["endpoint_calls"]["openai.files.content"] == 9  # 1 + 6 tries, then both again
    assert sorted(status for status, _, _ in results(workdir).values()) == ["failed"] + ["succeeded"] * 5
