"""The operator functions as Python API (`batchor.status`, `runs`, `export`, `prune`, ...), in
process, on DuckDB and on PostgreSQL: prune's writes are named state operations on both."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

import batchor
from batchor.errors import RunNotFoundError
from tests.conftest import make_spec


def _applied(workdir, fake, state=None, rows=6):
    spec = make_spec(workdir, rows=rows)
    result = batchor.apply(str(spec), state=state, handle_signals=False)
    assert result.status == "succeeded"
    return spec, result


def test_status_runs_and_exports_as_python_calls(workdir, fake):
    spec, result = _applied(workdir, fake)
    status = batchor.status()
    assert status["run_id"] == result.run_id and status["succeeded"] == 6
    assert status["spend"]["total_usd"] == pytest.approx(result.cost_usd)
    assert [r["run_id"] for r in batchor.runs()] == [result.run_id]
    written = batchor.export(workdir / "out.parquet")
    assert pq.read_table(written["output"]).num_rows == 6
    audit = batchor.export_attempts(workdir / "attempts.jsonl", result.run_id)
    lines = [json.loads(line) for line in (workdir / "attempts.jsonl").read_text().splitlines()]
    assert audit["attempts"] == len(lines) == 6 and all(line["outcome"] == "ok" for line in lines)
    assert batchor.prices("gpt-4.1-mini", provider="openai")["models"][0]["model"] == "gpt-4.1-mini"
    with pytest.raises(RunNotFoundError):
        batchor.status("no-such-run")


def _prune_keeps_answers_until_asked(workdir, fake, state):
    spec, _ = _applied(workdir, fake, state)
    assert batchor.prune(state=state, finished=True) == {"raw_payloads_dropped": 6, "answers_dropped": 0}
    assert batchor.prune(state=state) == {"raw_payloads_dropped": 0, "answers_dropped": 0}
    assert batchor.plan(str(spec), state=state, save=False).header.totals.to_run == 0  # the cache is whole
    assert batchor.prune(state=state, answers=True)["answers_dropped"] == 6
    assert batchor.plan(str(spec), state=state, save=False).header.totals.to_run == 6  # paid again if applied


def test_prune_on_duckdb(workdir, fake):
    _prune_keeps_answers_until_asked(workdir, fake, None)


@pytest.mark.postgres
def test_prune_on_postgres(workdir, fake, pg_url):
    _prune_keeps_answers_until_asked(workdir, fake, pg_url)


def test_prune_older_than_keeps_recent_payloads(workdir, fake):
    _applied(workdir, fake)
    assert batchor.prune(older_than_days=1)["raw_payloads_dropped"] == 0
    assert batchor.prune(older_than_days=0)["raw_payloads_dropped"] == 6
