"""`batchor status` on a PostgreSQL run whose worker was killed (kill -9) between heartbeats: the
workers table counts what the worker committed (its done work items' stored results), not its last
heartbeat's counters, which said `ok 0` although its answers were stored."""

from __future__ import annotations

import json
import re

import psycopg
import pytest
from cli_helpers import Background, wait_until
from conftest import make_spec

from batchor import api

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # a real worker process on PostgreSQL, killed


def _stored(url: str) -> tuple[int, float]:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*), coalesce(sum(cost_usd), 0) FROM results "
                           "WHERE status = 'succeeded'").fetchone()
    return int(row[0]), float(row[1])


def test_a_killed_workers_counts_are_its_committed_answers(fake, workdir, pg_url, monkeypatch, batchor_cli):
    monkeypatch.setenv("BATCHOR_LEASE_S", "900")  # first heartbeat after 300 s: the worker dies before it
    fake.configure(latency_ms=100)
    spec = make_spec(workdir, rows=400, limits={"concurrency": 2, "max_attempts": 3})
    api.plan(spec, state=pg_url, save=workdir / "job.plan")
    with Background(workdir, "apply", "job.plan", "--state", pg_url) as worker:
        wait_until(lambda: _stored(pg_url)[0] >= 8, timeout=120, what="committed answers")
        worker.process.kill()
        worker.wait(timeout=30)
    committed, cost = _stored(pg_url)
    done = batchor_cli(workdir, "status", "--state", pg_url, "--json")
    assert done.returncode == 0, done.stderr
    (shown,) = json.loads(done.stdout)["workers"]
    assert (shown["succeeded"], shown["failed"]) == (committed, 0), shown
    assert shown["cost_usd"] == pytest.approx(cost) and shown["per_s"] > 0
    table = batchor_cli(workdir, "status", "--state", pg_url).stdout
    line = next(text for text in table.splitlines() if shown["worker_id"] in text)
    assert re.search(rf"\s{committed:,}\s+0\s", line), line  # the `ok` and `failed` columns
