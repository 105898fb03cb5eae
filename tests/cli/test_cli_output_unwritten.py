"""A run whose rows all succeeded but whose output file could not be written (a directory appeared
where the file goes, after apply checked the path) is `succeeded`: its status comes from its
rows. The command still fails (exit 1, the same message), and the record, `status` and `runs` say
the file was not written and how to write it (`batchor export RUN -o FILE`)."""

from __future__ import annotations

import csv
import json

import pytest
from cli_helpers import Background, wait_until
from conftest import make_spec

from batchor.errors import EXIT_ERROR

ROWS = 6


@pytest.fixture(params=["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)])
def state(request) -> list[str]:
    """No option (the project's DuckDB file), or `--state URL` of a fresh PostgreSQL database (a
    shared run of one worker: the last worker to leave closes the record)."""
    return [] if request.param == "duckdb" else ["--state", request.getfixturevalue("pg_url")]


def test_an_unwritable_output_leaves_the_status_to_the_rows_and_says_how_to_write_it(workdir, fake, state, batchor_cli):
    make_spec(workdir, rows=ROWS, limits={"concurrency": 1, "max_attempts": 1, "request_timeout_s": 30})
    fake.configure(latency_ms=150)
    target = workdir / "out" / "results.csv"
    with Background(workdir, "apply", "spec.yaml", "--yes", *state) as job:
        wait_until(lambda: fake.stats()["requests"] >= 1, what="the first request", timeout=180)
        target.mkdir(parents=True)  # after apply checked the path, before it writes the file
        assert job.wait(timeout=180) == EXIT_ERROR, job.stderr
    assert f"cannot write output {target}" in job.stderr or f"output path {target} is a directory" in job.stderr
    assert "Traceback" not in job.stderr
    assert fake.stats()["requests"] == ROWS

    runs = batchor_cli(workdir, "runs", "--json", *state)
    run = json.loads(runs.stdout)[0]
    assert run["status"] == "succeeded", run
    assert run["rows"] == {"succeeded": ROWS, "failed": 0, "pending": 0, "skipped": 0}
    assert run["output_path"] is None and run["finished_at"] is not None
    assert f"output not written (output path {target} is a directory)" in run["paused_reason"]
    assert f"`batchor export {run['run_id']} -o FILE` writes it" in run["paused_reason"]

    status = batchor_cli(workdir, "status", *state).stdout
    assert "succeeded" in status and "output not written" in status and "batchor export" in status, status
    listing = batchor_cli(workdir, "runs", *state).stdout
    assert "*: its output file was not written" in listing and "succeeded*" in listing, listing

    written = batchor_cli(workdir, "export", run["run_id"], "-o", "elsewhere.csv", *state)  # the fix it names works
    assert written.returncode == 0, written.stderr
    with (workdir / "elsewhere.csv").open(newline="") as handle:
        assert [row["_status"] for row in csv.DictReader(handle)] == ["succeeded"] * ROWS
