"""`batchor status` on a PostgreSQL run counts the answers stored so far, from the first seconds:
not the workers' heartbeat sums, which arrive a third of a lease apart."""

from __future__ import annotations

import json
import signal

import pytest
from cli_helpers import Background, wait_until
from conftest import make_spec

from batchor import api

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # a real worker process on PostgreSQL, interrupted


def status(cli, folder, url) -> dict:
    done = cli(folder, "status", "--state", url, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_status_counts_answers_before_the_first_heartbeat(fake, workdir, pg_url, monkeypatch, batchor_cli):
    monkeypatch.setenv("BATCHOR_LEASE_S", "900")  # first heartbeat after 300 s: long after this test
    fake.configure(latency_ms=100)
    spec = make_spec(workdir, rows=400, limits={"concurrency": 2, "max_attempts": 3})
    api.plan(spec, state=pg_url, save=workdir / "job.plan")
    with Background(workdir, "apply", "job.plan", "--state", pg_url) as worker:
        wait_until(lambda: fake.stats()["answered"] >= 6, timeout=120, what="answers")
        wait_until(
            lambda: status(batchor_cli, workdir, pg_url)["succeeded"] >= 3, timeout=30, what="live counts in status"
        )
        live = status(batchor_cli, workdir, pg_url)
        assert live["finished_at"] is None and live["cost_usd"] > 0
        assert live["succeeded"] <= fake.stats()["answered"]
        assert [w["heartbeat_age_s"] > 0 for w in live["workers"]] == [True]
        worker.process.send_signal(signal.SIGINT)
        assert worker.wait(timeout=120) == 130, worker.stderr
