"""A step switched to realtime while its batches are in flight: the rows in those batches are
collected from them, never sent again; only rows without a batch (or whose batch ended without
their answer) go realtime. The fake counts every answer it makes per prompt, batch or realtime."""

from __future__ import annotations

import pytest

from batchor.errors import EXIT_IN_FLIGHT
from tests.conftest import write_csv
from tests.engine.batch_helpers import batch_spec, batches, cli, results, submitted

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]  # kills, restarts, every fault: CI's full tier


def answered_once(fake, rows: int) -> bool:
    """Every row was answered exactly once, whether by a batch or by a realtime call."""
    by_prompt = fake.stats()["by_prompt"]
    return len(by_prompt) == rows and set(by_prompt.values()) == {1}


def sent(fake) -> tuple[int, int]:
    """(rows submitted in batches, realtime calls)."""
    stats = fake.stats()
    return sum(stats["batch_rows_by_id"].values()), sum(stats["by_endpoint"].values())


def test_realtime_apply_collects_rows_in_flight_and_sends_only_new_rows(fake, workdir):
    fake.configure(batch_polls=2)
    spec = batch_spec(workdir, rows=7, batch_max_requests=4)
    assert cli(workdir, "apply", spec, "--yes", "--no-wait").returncode == EXIT_IN_FLIGHT
    write_csv(workdir / "data.csv", [{"id": f"r{i}", "text": f"review number {i}"} for i in range(10)])
    done = cli(workdir, "apply", spec, "--yes", "--mode", "realtime")
    assert done.returncode == 0, done.stderr
    assert len(results(workdir)) == 10 and answered_once(fake, 10)
    assert sent(fake) == (7, 3)  # only the appended rows went realtime
    assert set(submitted(fake).values()) == {1} and {b[0] for b in batches(workdir)} == {"collected"}


def test_rows_a_batch_ended_without_go_realtime_once_it_is_collected(fake, workdir):
    fake.configure(batch_polls=2, batch_end="expired", batch_done_fraction=0.5)
    spec = batch_spec(workdir, rows=8)
    assert cli(workdir, "apply", spec, "--yes", "--no-wait").returncode == EXIT_IN_FLIGHT
    done = cli(workdir, "apply", spec, "--yes", "--mode", "realtime")
    assert done.returncode == 0, done.stderr
    assert len(results(workdir)) == 8 and answered_once(fake, 8)
    assert sent(fake) == (8, 4)  # realtime: only the half the expired batch never ran
    assert [b[2:5] for b in batches(workdir)] == [(4, 0, 4)]  # succeeded, failed, requeued


def test_no_wait_leaves_the_batches_in_flight_and_sends_nothing_of_theirs(fake, workdir):
    fake.configure(batch_polls=3)
    spec = batch_spec(workdir, rows=5)
    assert cli(workdir, "apply", spec, "--yes", "--no-wait").returncode == EXIT_IN_FLIGHT
    again = cli(workdir, "apply", spec, "--yes", "--mode", "realtime", "--no-wait")
    assert again.returncode == EXIT_IN_FLIGHT, again.stderr
    assert sent(fake) == (5, 0) and [b[0] for b in batches(workdir)] == ["submitted"]
    done = cli(workdir, "apply", spec, "--yes", "--mode", "realtime")
    assert done.returncode == 0, done.stderr
    assert sent(fake) == (5, 0) and answered_once(fake, 5) and len(results(workdir)) == 5


@pytest.mark.postgres
def test_a_shared_run_refuses_to_send_rows_of_live_batches_realtime(fake, workdir, pg_url):
    fake.configure(batch_polls=3)
    spec = batch_spec(workdir, rows=5)
    assert cli(workdir, "apply", spec, "--yes", "--no-wait", "--state", pg_url).returncode == EXIT_IN_FLIGHT
    refused = cli(workdir, "apply", spec, "--yes", "--mode", "realtime", "--state", pg_url)
    assert refused.returncode == EXIT_IN_FLIGHT and "error [batches_in_flight]" in refused.stderr, refused.stderr
    assert "--mode batch" in refused.stderr and sent(fake) == (5, 0)
    collected = cli(workdir, "apply", spec, "--yes", "--state", pg_url)
    assert collected.returncode == 0, collected.stderr
    assert sent(fake) == (5, 0) and answered_once(fake, 5)
