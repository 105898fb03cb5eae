"""`batchor status` on a PostgreSQL run whose worker was killed (kill -9) between heartbeats: the
workers table counts what the worker committed (its done work items' stored results), not its last
heartbeat's counters, which said `ok 0` although its answers were stored; and once another worker
has finished the run (its work items are then deleted) each worker still shows what it committed."""

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
        row = conn.execute(
            "SELECT count(*), coalesce(sum(cost_usd), 0) FROM results WHERE status = 'succeeded'"
        ).fetchone()
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
    data = json.loads(done.stdout)
    (shown,), shown_run = data["workers"], data["run_id"]
    assert (shown["succeeded"], shown["failed"]) == (committed, 0), shown
    assert shown["cost_usd"] == pytest.approx(cost) and shown["per_s"] > 0
    table = batchor_cli(workdir, "status", "--state", pg_url).stdout
    line = next(text for text in table.splitlines() if shown["worker_id"] in text)
    assert re.search(rf"\s{committed:,}\s+0\s", line), line  # the `ok` and `failed` columns

    fake.configure(latency_ms=0)
    with Background(workdir, "apply", "job.plan", "--state", pg_url, name="second") as second:
        # It joins the run while the dead worker's lease still looks live; then that lease runs
        # out (as 900 s would), the second takes its rows over, finishes and closes the run.
        wait_until(lambda: _count(pg_url, "SELECT count(*) FROM workers") == 2, timeout=120, what="the second worker")
        _count(pg_url, f"UPDATE workers SET lease_until = now() WHERE worker_id = '{shown['worker_id']}' RETURNING 1")
        assert second.wait(timeout=120) == 0, second.stderr
    after = json.loads(batchor_cli(workdir, "status", "--state", pg_url, "--json").stdout)
    assert after["status"] == "succeeded" and after["finished_at"] and after["run_id"] == shown_run
    assert _count(pg_url, "SELECT count(*) FROM work_items") == 0  # closed: its items are gone
    lost, finished = after["workers"]
    assert (lost["status"], lost["succeeded"], lost["per_s"]) == ("lost", committed, None), lost
    assert finished["status"] == "finished" and finished["succeeded"] == 400 - committed and finished["per_s"] > 0


def _count(url: str, sql: str) -> int:
    with psycopg.connect(url) as conn:
        return int(conn.execute(sql).fetchone()[0])
