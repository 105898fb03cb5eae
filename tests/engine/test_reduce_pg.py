"""Reduce steps on a shared PostgreSQL run: several `batchor apply` workers fold the same groups,
each request of every fold tree is sent once, and every row gets its group's answer (real
PostgreSQL from tests/pg_server.py, real openai SDK against the fake provider)."""

from __future__ import annotations

import csv

import psycopg
import pytest

from batchor import api
from tests.cli.cli_helpers import Background
from tests.engine.test_reduce import _rows, _spec

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(240)]  # worker processes


def _query(url: str, sql: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()


@pytest.mark.parametrize("mode", ["realtime", "batch"])
def test_three_workers_fold_each_group_once(fake, workdir, pg_url, mode):
    fake.configure(latency_ms=150)  # every worker joins before the first round is done
    rows = [{**r, "text": f"{r['text']} {mode}"} for r in _rows(big=40, small=6)]
    spec = _spec(workdir, rows, keep="rows")
    plan = api.plan(spec, state=pg_url, mode=mode, save=workdir / "job.plan")
    planned = plan.steps["summary"]["to_run"]
    assert planned > 4  # parts of the big group, at least one fold, the small group

    workers = [Background(workdir, "apply", "job.plan", "--state", pg_url, name=f"w{i}") for i in range(3)]
    try:
        for worker in workers:
            assert worker.wait(timeout=200) == 0, worker.stderr_path.read_text()[-3000:]
    finally:
        for worker in workers:
            worker.__exit__()

    stats = fake.stats()
    answered = stats["by_prompt"]
    assert sum(answered.values()) == len(answered) == planned, stats["batch_rows_by_id"]  # each request once
    assert not stats["batch_rows_duplicated"]
    with (workdir / "out" / "groups.csv").open(encoding="utf-8") as handle:
        out = list(csv.DictReader(handle))
    assert len(out) == 46 and {r["_status"] for r in out} == {"succeeded"}
    by_product = {(r["product"], r["summary.points"]) for r in out}
    assert len(by_product) == 2  # every row of a group holds the group's one answer
    mapped = _query(pg_url, "SELECT count(*), count(DISTINCT row_key) FROM job_requests WHERE step = 'summary'")
    assert mapped == [(46, 46)]
    assert api.plan(spec, state=pg_url, mode=mode, save=False).steps["summary"]["to_run"] == 0
