"""Operator commands, human and --json output: status, runs, export, prune, prices, init."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from tests.conftest import make_spec


@pytest.fixture
def batchor(batchor_cli, workdir):
    """`batchor ARGS...` in the working folder (in this process); exit 0 asserted unless check=False."""

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        done = batchor_cli(workdir, *args)
        if check:
            assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done

    return run


def _applied(batchor, workdir, **kw):
    spec = make_spec(workdir, rows=12, **kw)
    batchor("apply", str(spec), "--yes")
    return spec


def test_status_and_runs_human_and_json(fake, workdir, batchor):
    fake.configure(fail_matching={"review number 3": 400})
    spec = make_spec(workdir, rows=12)
    done = batchor("apply", str(spec), "--yes", check=False)
    assert done.returncode == 3
    status = json.loads(batchor("status", "--json").stdout)
    assert status["status"] == "partial" and status["failed"] == 1 and status["succeeded"] == 11
    assert status["failures_by_reason"] == {"invalid_request": 1}
    human = batchor("status").stdout
    assert "partial" in human and "invalid_request" in human
    runs = json.loads(batchor("runs", "--json").stdout)
    assert len(runs) == 1 and runs[0]["run_id"] == status["run_id"] and runs[0]["cost_usd"] > 0
    assert status["run_id"] in batchor("runs").stdout
    missing = batchor("status", "nope", "--json", check=False)
    assert missing.returncode == 1 and "run_not_found" in missing.stdout + missing.stderr


def test_export_results_and_attempts(fake, workdir, batchor):
    _applied(batchor, workdir)
    out = workdir / "exported.parquet"
    data = json.loads(batchor("export", "-o", str(out), "--json").stdout)
    assert data["output"] == str(out)
    table = pq.read_table(out)
    assert table.num_rows == 12 and "classify.sentiment" in table.column_names
    assert "wrote" in batchor("results", "-o", str(workdir / "again.csv")).stdout
    attempts = workdir / "attempts.jsonl"
    batchor("export", "--attempts", "-o", str(attempts))
    lines = [json.loads(line) for line in attempts.read_text().splitlines()]
    assert len(lines) == 12 and all(line["raw"]["choices"] for line in lines)  # raw responses kept
    assert "sk-test-secret" not in attempts.read_text()


@pytest.mark.slow  # reads the state while a real apply in another process writes it
def test_export_while_unfinished_shows_pending_rows(fake, workdir, batchor):
    fake.configure(latency_ms=300)
    spec = make_spec(workdir, rows=100, limits={"concurrency": 2})
    proc = subprocess.Popen(
        [sys.executable, "-m", "batchor.cli.main", "apply", str(spec), "--yes"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # wait until some answers are stored
            done = batchor("status", "--json", check=False)
            if done.returncode == 0 and json.loads(done.stdout)["succeeded"] >= 2:
                break
            time.sleep(0.3)
        out = workdir / "partial.csv"
        batchor("export", "-o", str(out))
        status = json.loads(batchor("status", "--json").stdout)
        assert status["status"] == "running"
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    import csv

    rows = list(csv.DictReader(out.open()))
    states = {r["_status"] for r in rows}
    assert "pending" in states and "succeeded" in states and len(rows) == 100


def test_prune_drops_raw_payloads_but_keeps_answers(fake, workdir, batchor):
    spec = _applied(batchor, workdir)
    result = json.loads(batchor("prune", "--finished", "--json").stdout)
    assert result == {"raw_payloads_dropped": 12, "answers_dropped": 0}
    fake.reset()
    batchor("apply", str(spec), "--yes")
    assert fake.stats()["requests"] == 0  # answers still cached
    assert "Dropped 0 raw request/response payloads and 0 cached answers." in batchor("prune").stdout
    dropped = json.loads(batchor("prune", "--answers", "--json").stdout)
    assert dropped["answers_dropped"] == 12


def test_prices_lookup(workdir, batchor):
    data = json.loads(batchor("prices", "gpt-4.1-mini", "--provider", "openai", "--json").stdout)
    assert data["table"]["source"] == "genai-prices" and data["table"]["offline"] is True
    match = [m for m in data["models"] if m["model"] == "gpt-4.1-mini"]
    assert match and match[0]["input_per_mtok"] > 0
    assert "gpt-4.1-mini" in batchor("prices", "gpt-4.1-mini").stdout


def test_init_scaffolds_a_runnable_job(workdir, batchor):
    out = batchor("init", "job").stdout
    assert "created job/job.yaml" in out
    batchor("validate", "job/job.yaml")
    batchor("apply", "job/job.yaml", "--mock", "--yes")
    assert (workdir / "job" / "out" / "results.mock.csv").exists()  # a rehearsal writes beside the real output
    again = batchor("init", "job", check=False)
    assert again.returncode == 1 and "already exist" in again.stderr


def test_usage_error_exit_code(workdir):
    """The real command (not in this process): its exit code for a usage error."""
    done = subprocess.run(
        [sys.executable, "-m", "batchor.cli.main", "apply"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 64
