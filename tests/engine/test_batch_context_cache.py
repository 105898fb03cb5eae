"""Gemini explicit context caches in batch steps, end to end through the real google-genai SDK
against the fake: the cache is made before the step's first job, every line names it, the lane
deletes it once the jobs are collected, its fees are recorded as the fake bills them, and a
process killed between making the cache and creating the job never pays for a second one."""

from __future__ import annotations

import duckdb
import pytest

from batchor import api, operations
from batchor.plan.context_cache import explicit_usd
from batchor.plan.prices import ModelPrice
from tests.engine.batch_helpers import FAST, cli
from tests.engine.test_context_cache import explicit_spec
from tests.engine.test_prompt_cache import STATE
from tests.fakes.bill import context_bill, fake_bill


def _reads(workdir) -> tuple[int, int]:
    with duckdb.connect(str(workdir / STATE), read_only=True) as db:
        row = db.execute("SELECT count(*) FILTER (WHERE cache_read_tokens >= 1024), count(*) FROM attempts").fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def test_a_batch_step_reads_its_system_prompt_from_a_context_cache_deleted_after_collection(workdir, fake, batchor_cli):
    spec = explicit_spec(workdir, rows=6, **FAST)
    shown = batchor_cli(workdir, "show", str(spec)).stdout
    assert "explicit context cache of the system prompt" in shown and "deleted once its batches are collected" in shown
    step = api.plan(spec, save=False).header.steps[0]
    assert step.mode == "batch" and step.prompt_cache is not None and step.prompt_cache.explicit
    price = ModelPrice.from_dict(step.price or {})
    assert 0 < explicit_usd(step, price, 6) < explicit_usd(step, price, 6, upper=True)  # 2 h expected, 25 h upper
    assert api.apply(spec, handle_signals=False).succeeded == 6
    stats = fake.stats()
    assert stats["context_caches"]["created"] == 1 and stats["context_caches"]["deleted"] == 1
    assert _reads(workdir) == (6, 6)  # every line read it (the implicit batch cache misses some)
    spend = operations.runs(limit=1)[0]["spend"]
    seconds = step.prompt_cache.system_tokens * 10 / 3600 / 1e6  # ten seconds of storage
    assert spend["caches_held"] == 1 and spend["cache_fees_usd"] == pytest.approx(context_bill(stats), abs=seconds)
    assert spend["total_usd"] == pytest.approx(fake_bill(stats), abs=seconds)


@pytest.mark.slow  # a process of its own, killed
def test_a_crash_between_the_cache_and_the_job_reuses_the_cache(workdir, fake):
    spec = explicit_spec(workdir, rows=4, **FAST)
    cli(workdir, "apply", spec, "--yes", crash_at="after_cache")
    assert fake.stats()["context_caches"]["created"] == 1 and not fake.stats()["batches_created"]
    assert api.apply(spec, handle_signals=False).succeeded == 4
    stats = fake.stats()
    assert stats["context_caches"]["created"] == 1 and stats["context_caches"]["deleted"] == 1  # found by its name
    with duckdb.connect(str(workdir / STATE), read_only=True) as db:
        (deleted, runs), *others = db.execute(
            "SELECT deleted, count(DISTINCT run_id) FROM cache_fees GROUP BY 1"
        ).fetchall()
    assert not others and deleted and runs == 1  # one fee, with the run that made it, brought down to the delete
    total = sum(r["spend"]["total_usd"] for r in operations.runs(limit=5))
    assert total == pytest.approx(fake_bill(stats), abs=1e-5)
