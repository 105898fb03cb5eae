"""The `batchor` script leaves without the interpreter's teardown (cli/main.py `main`): what a
command printed, wrote and committed is all there, and its exit code is kept."""

from __future__ import annotations

import json

import duckdb

from tests.cli.cli_helpers import cli_env, run_cli
from tests.engine.batch_helpers import batch_spec


def test_a_batch_apply_leaves_its_output_and_state_complete(fake, workdir):
    spec = batch_spec(workdir, rows=30)
    done = run_cli(workdir, "apply", spec, "--yes", "--json", env=cli_env(OPENAI_BASE_URL=fake.openai_base_url))
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert events[-1]["event"] == "run_finished" and events[-1]["succeeded"] == 30
    db = duckdb.connect(str(workdir / ".batchor" / "state.duckdb"), read_only=True)
    try:
        assert db.execute("SELECT status, succeeded FROM runs").fetchall() == [("succeeded", 30)]
        assert db.execute("SELECT count(*) FROM results WHERE status = 'succeeded'").fetchall() == [(30,)]
    finally:
        db.close()
    assert (workdir / "out" / "results.csv").read_text(encoding="utf-8").count("\n") == 31


def test_an_error_keeps_its_exit_code_and_message(workdir):
    failed = run_cli(workdir, "apply", "missing.yaml", "--yes")
    assert failed.returncode == 1 and "spec file not found: missing.yaml" in failed.stderr
