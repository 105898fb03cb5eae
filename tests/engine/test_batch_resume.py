"""Durability of batch mode across processes: a kill at any point of a batch's life, an
uncertain create, `--no-wait` and `cancel` never lead to the same rows in two live batches.

Each scenario runs the real CLI in subprocesses; `BATCHOR_TEST_CRASH_AT` SIGKILLs the process
at a named point, deterministically. The fake counts every row submitted per custom_id.
"""

from __future__ import annotations

import json
import signal

import pytest

from batchor.errors import EXIT_IN_FLIGHT
from tests.engine.batch_helpers import batch_spec, batches, cli, results, submitted

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]  # kills, restarts, every fault: CI's full tier


@pytest.mark.parametrize("point", ["after_intent", "after_create", "after_submit", "during_poll", "after_results"])
def test_kill_at_any_point_then_resume_in_a_new_process_sends_each_row_once(fake, workdir, point):
    spec = batch_spec(workdir, rows=12, batch_max_requests=5)
    killed = cli(workdir, "apply", spec, "--yes", crash_at=point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    done = cli(workdir, "apply", spec, "--yes")
    assert done.returncode == 0, done.stderr
    stored = results(workdir)
    assert len(stored) == 12 and {s for s, _, _ in stored.values()} == {"succeeded"}
    counts = submitted(fake)
    assert len(counts) == 12 and set(counts.values()) == {1}, counts
    assert {b[0] for b in batches(workdir)} == {"collected"}


def test_create_answered_after_the_client_timeout_is_reconciled_not_repeated(fake, workdir):
    fake.configure(batch_create_delay_s=1.5)
    spec = batch_spec(workdir, rows=6, request_timeout_s=0.5)
    done = cli(workdir, "apply", spec, "--yes", "--json")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line)["event"] for line in done.stdout.splitlines() if line.startswith("{")]
    assert "batch_create_failed" in events and "batch_reattached" in events
    assert fake.stats()["batches_created"] == 1 and set(submitted(fake).values()) == {1}
    assert len(results(workdir)) == 6


def test_no_wait_exits_in_flight_and_a_later_apply_collects(fake, workdir):
    fake.configure(batch_polls=2)
    spec = batch_spec(workdir, rows=7, batch_max_requests=4)
    first = cli(workdir, "apply", spec, "--yes", "--no-wait")
    assert first.returncode == EXIT_IN_FLIGHT, first.stderr
    assert "in flight" in first.stderr
    status = cli(workdir, "status", "--json")
    shown = json.loads(status.stdout)
    assert shown["status"] == "in_flight"
    assert [b["state"] for b in shown["batches"]] == ["submitted", "submitted"]
    text = cli(workdir, "status")
    assert "batches: 2" in text.stdout
    assert json.loads(status.stdout)["rows"] == {"succeeded": 0, "failed": 0, "pending": 7, "skipped": 0}
    second = cli(workdir, "apply", spec, "--yes")
    assert second.returncode == 0, second.stderr
    assert len(results(workdir)) == 7 and set(submitted(fake).values()) == {1}
    earlier = json.loads(cli(workdir, "status", shown["run_id"], "--json").stdout)  # collected by the second
    assert earlier["status"] == "succeeded" and earlier["rows"]["succeeded"] == 7, earlier


def test_cancel_records_the_cancel_and_the_next_apply_resubmits_only_unanswered_rows(fake, workdir):
    fake.configure(batch_polls=100, batch_done_fraction=0.5)
    spec = batch_spec(workdir, rows=8)
    assert cli(workdir, "apply", spec, "--yes", "--no-wait").returncode == EXIT_IN_FLIGHT
    cancelled = cli(workdir, "cancel", "--json")
    assert cancelled.returncode == 0, cancelled.stderr
    [batch] = json.loads(cancelled.stdout)["batches"]
    assert batch["remote_status"] == "cancelling"
    fake.configure(batch_polls=1)
    done = cli(workdir, "apply", spec, "--yes")
    assert done.returncode == 0, done.stderr
    assert sorted(submitted(fake).values()) == [1] * 4 + [2] * 4
    assert len(results(workdir)) == 8
