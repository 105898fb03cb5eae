"""Fallback models and escalation of a batch step on a shared PostgreSQL run: three `batchor apply`
workers run the step's batches, then its fallback and escalation waves, each request of each model
sent once across the workers, and every row answered by the model it should be (real PostgreSQL
from tests/pg_server.py, real openai and anthropic SDKs against the fake)."""

from __future__ import annotations

from collections import Counter

import psycopg
import pyarrow.parquet as pq
import pytest

from batchor import api
from tests.cli.cli_helpers import Background
from tests.engine.test_other_models_batch import BACKUP, PRIMARY, SCHEMA, STRONG, spec_of

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(240)]  # worker processes


def test_three_workers_send_each_fallback_and_escalation_request_once(fake, workdir, pg_url):
    fake.reset(config=True, batches=True)
    fake.configure(fail_model={PRIMARY: {"review number 1": "malformed", "review number 5": "malformed"}})
    step = {"output": {"schema": SCHEMA}, "escalate": {"to": f"openai:{STRONG}", "when": "classify.confidence < 0.5"}}
    spec = spec_of(workdir, rows=12, step=step, max_attempts=1)
    api.plan(str(spec), state=pg_url, save=workdir / "job.plan")

    workers = [Background(workdir, "apply", "job.plan", "--state", pg_url, name=f"w{i}") for i in range(3)]
    try:
        for worker in workers:
            assert worker.wait(timeout=200) == 0, worker.stderr_path.read_text()[-3000:]
    finally:
        for worker in workers:
            worker.__exit__()

    stats = fake.stats()
    assert not stats["batch_rows_duplicated"] and set(stats["batch_rows_by_id"].values()) == {1}, stats
    assert stats["requests"] == 0  # every wave went in a batch: no request realtime
    rows = pq.read_table(workdir / "out" / "results.parquet").to_pylist()
    assert len(rows) == 12 and {r["_status"] for r in rows} == {"succeeded"}
    models = Counter(r["_model"] for r in rows)
    moved = {r["id"] for r in rows if r["_model"] == f"anthropic:{BACKUP}"}
    assert moved == {"r1", "r10", "r11", "r5"} and models[f"openai:{STRONG}"] > 0, models  # "review number 1" too
    with psycopg.connect(pg_url) as conn:
        by_model = dict(conn.execute("SELECT model, count(*) FROM results GROUP BY model").fetchall())
    assert by_model[f"anthropic:{BACKUP}"] == 4 and by_model[f"openai:{STRONG}"] == models[f"openai:{STRONG}"]
    assert len(stats["batch_rows_by_id"]) == 12 + 4 + models[f"openai:{STRONG}"]
    assert api.plan(str(spec), state=pg_url, save=False).steps["classify"]["to_run"] == 0
