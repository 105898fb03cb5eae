"""`status`, `runs`, the report and `Result` count one unit per figure, and say which: rows are the
output's rows by `_status` when the run ended (the failures table and the output file count
them too); requests are the model requests the run sent (one answers every row with the same
text; a SQL step sends none). A finished run keeps what it ended with, so `status RUN` of an
earlier run shows its own rows and failures, not the job's as a later run left them."""

from __future__ import annotations

import csv
import json
from collections import Counter

import yaml

import batchor
from tests.conftest import make_spec, write_csv

TRIAGE = {
    "type": "object",
    "properties": {"kind": {"type": "string", "enum": ["a", "b"]}},
    "required": ["kind"],
    "additionalProperties": False,
}
NO_RETRY = {"concurrency": 4, "max_attempts": 1, "request_timeout_s": 10}


def _single_step(folder) -> str:
    """8 rows, 6 requests: r6 and r7 have r3's text, so the three share one request."""
    spec = make_spec(folder, rows=8, limits=NO_RETRY)
    texts = [f"review number {i}" for i in range(6)] + ["review number 3"] * 2
    write_csv(folder / "data.csv", [{"id": f"r{i}", "text": t} for i, t in enumerate(texts)])
    return str(spec)


def _pipeline(folder) -> str:
    """14 rows (t12, t13 have t3's text): an LLM step, a SQL step, an LLM step under `when:`."""
    texts = [f"ticket {i}" for i in range(12)] + ["ticket 3"] * 2
    write_csv(folder / "data.csv", [{"id": f"t{i}", "text": t} for i, t in enumerate(texts)])
    spec = {
        "name": "pipe",
        "input": {"path": "data.csv", "key": "id"},
        "model": {"provider": "openai", "name": "gpt-4.1-mini", "params": {"max_tokens": 30}},
        "steps": {
            "triage": {"prompt": "Triage {{ row.text }}", "output": {"schema": TRIAGE}},
            "route": {"sql": "SELECT _row_key, triage.kind AS kind FROM rows"},
            "reply": {
                "prompt": "Answer {{ row.text }} ({{ route.kind }})",
                "output": "text",
                "when": "route.kind == 'a'",
            },
        },
        "output": {"path": "out.csv"},
        "limits": NO_RETRY,
    }
    (folder / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(folder / "spec.yaml")


def _statuses(path) -> Counter:
    with open(path, newline="", encoding="utf-8") as handle:
        return Counter(r["_status"] for r in csv.DictReader(handle))


def _status(batchor_cli, folder, *run: str) -> dict:
    done = batchor_cli(folder, "status", *run, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_single_step_jobs_rows_and_requests_are_counted_apart(workdir, fake, batchor_cli):
    spec = _single_step(workdir)
    fake.configure(fail_matching={"review number 3": 400, "review number 5": 400})
    assert batchor_cli(workdir, "apply", spec, "--max-cost", "1").returncode == 3
    in_file = _statuses(workdir / "out" / "results.csv")
    assert in_file == {"succeeded": 4, "failed": 4}  # r3, r5, r6, r7

    status = _status(batchor_cli, workdir)
    assert status["rows"] == {"succeeded": 4, "failed": 4, "pending": 0, "skipped": 0}
    assert (status["succeeded"], status["failed"], status["requests"]) == (4, 2, 6)  # requests
    assert status["failures_by_reason"] == {"invalid_request": 4}  # rows, as in the file

    human = batchor_cli(workdir, "status").stdout
    assert "4 succeeded, 4 failed, 0 pending, 0 skipped, of 8 output rows" in human
    assert "4 answered, 2 failed, of 6 to send; 0 rows' answers were cached" in human
    runs = batchor_cli(workdir, "runs").stdout
    assert "ok, failed: output rows at the end" in runs
    line = next(line for line in runs.splitlines() if status["run_id"] in line)
    assert line.split()[3:5] == ["4", "4"], runs


def test_a_pipeline_counts_rows_once_and_a_sql_step_sends_no_requests(workdir, fake, batchor_cli):
    spec = _pipeline(workdir)
    fake.configure(fail_matching={"Triage ticket 3": 400, "Answer ticket 10": 400})
    result = batchor.apply(spec, max_cost=1)
    in_file = _statuses(workdir / "out.csv")
    assert in_file == {"succeeded": 10, "failed": 4}  # t3, t12, t13 in triage; t10 in reply
    assert result.rows == {"succeeded": 10, "failed": 4, "pending": 0, "skipped": 0}
    assert "rows 10 succeeded, 4 failed; requests " in repr(result)

    status = _status(batchor_cli, workdir)
    assert status["rows"] == result.rows
    with open(workdir / "out.csv", newline="", encoding="utf-8") as handle:
        replies = sum(1 for r in csv.DictReader(handle) if r["route.kind"] == "a")
    assert replies >= 2  # t1 and t10 at least: the `when:` step ran for some rows only
    # triage: 12 distinct texts, 1 failed; reply: one request per routed row, t10's failed; route: none
    assert (status["succeeded"], status["failed"]) == (11 + replies - 1, 2)
    assert (result.succeeded, result.failed) == (status["succeeded"], status["failed"])
    assert status["failures_by_reason"] == {"invalid_request": 4}
    runs = json.loads(batchor_cli(workdir, "runs", "--json").stdout)
    assert runs[0]["rows"] == result.rows and runs[0]["succeeded"] == status["succeeded"]
    report = json.loads(batchor_cli(workdir, "report", "--json").stdout)
    assert report["run"]["rows"] == result.rows


def test_status_of_an_earlier_run_shows_what_it_ended_with(workdir, fake, batchor_cli):
    spec = _single_step(workdir)
    fake.configure(fail_matching={"review number 3": 400})
    assert batchor_cli(workdir, "apply", spec, "--max-cost", "1").returncode == 3
    first = _status(batchor_cli, workdir)
    fake.configure(fail_matching={})
    fixed = batchor_cli(workdir, "apply", spec, "--max-cost", "1", "--retry-failed")
    assert fixed.returncode == 0, fixed.stderr

    earlier = _status(batchor_cli, workdir, first["run_id"])
    assert earlier["rows"] == {"succeeded": 5, "failed": 3, "pending": 0, "skipped": 0}
    assert earlier["failures_by_reason"] == {"invalid_request": 3}
    assert earlier["failed_rows_cost"]["invalid_request"]["rows"] == 3
    human = batchor_cli(workdir, "status", first["run_id"]).stdout
    assert "failed rows by reason" in human and "invalid_request" in human
    report = json.loads(batchor_cli(workdir, "report", first["run_id"], "--json").stdout)
    assert [(g["reason"], g["rows"]) for g in report["failures"]] == [("invalid_request", 3)]
    assert report["run"]["rows"] == earlier["rows"]
    assert "invalid_request: 3 row(s)" in batchor_cli(workdir, "report", first["run_id"], "--format", "markdown").stdout

    latest = _status(batchor_cli, workdir)
    assert latest["run_id"] != first["run_id"]
    assert latest["rows"] == {"succeeded": 8, "failed": 0, "pending": 0, "skipped": 0}
    assert latest["failures_by_reason"] == {} and (latest["succeeded"], latest["failed"]) == (1, 0)
    assert "failed rows by reason" not in batchor_cli(workdir, "status").stdout
    assert json.loads(batchor_cli(workdir, "report", "--json").stdout)["failures"] == []
    by_run = {r["run_id"]: r["rows"] for r in json.loads(batchor_cli(workdir, "runs", "--json").stdout)}
    assert by_run == {first["run_id"]: earlier["rows"], latest["run_id"]: latest["rows"]}
