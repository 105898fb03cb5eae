"""`results RUN` / `export RUN` of an earlier run: the rows of the plan that run applied, with the
answers the state holds now (it keeps one answer per request, not one per run). When later runs of
the same job have changed them, the command says so on stderr (piped data stays data), and
`status RUN` still shows what that run ended with."""

from __future__ import annotations

import csv
import io
import json

from tests.conftest import make_spec

ROWS = 5


def test_an_earlier_runs_results_say_they_are_the_rows_as_they_are_now(workdir, fake, batchor_cli):
    spec = make_spec(workdir, rows=ROWS, limits={"concurrency": 2, "max_attempts": 1, "request_timeout_s": 10})
    fake.configure(fail_matching={"review number 3": 400})
    first = batchor_cli(workdir, "apply", spec, "--max-cost", "1", "--json")
    assert first.returncode == 3, first.stderr
    fake.configure(fail_matching={})
    second = batchor_cli(workdir, "apply", spec, "--max-cost", "1", "--retry-failed")
    assert second.returncode == 0, second.stderr
    earlier, latest = [r["run_id"] for r in json.loads(batchor_cli(workdir, "runs", "--json").stdout)][::-1]

    shown = batchor_cli(workdir, "results", earlier)  # into a pipe: CSV on stdout, the note on stderr
    assert shown.returncode == 0, shown.stderr
    statuses = [row["_status"] for row in csv.DictReader(io.StringIO(shown.stdout))]
    assert statuses == ["succeeded"] * ROWS  # row 3 as it is now, answered by the later run
    assert f"note: run {earlier} is not the latest run of its job" in shown.stderr
    assert f"after 1 later run(s) ({latest})" in shown.stderr and f"`batchor status {earlier}`" in shown.stderr
    ended = json.loads(batchor_cli(workdir, "status", earlier, "--json").stdout)["rows"]
    assert ended["failed"] == 1 and ended["succeeded"] == ROWS - 1  # what it ended with is kept there

    exported = batchor_cli(workdir, "export", earlier, "-o", "earlier.csv", "--json")
    data = json.loads(exported.stdout)
    assert data["rows_as_of"] == "now" and data["later_runs"] == [latest] and earlier in data["note"]

    plain = batchor_cli(workdir, "results", latest)  # the latest run: its rows are its own, no note
    assert plain.returncode == 0 and "note:" not in plain.stderr, plain.stderr
    assert json.loads(batchor_cli(workdir, "export", latest, "-o", "l.csv", "--json").stdout)["note"] is None
