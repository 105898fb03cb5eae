"""What a new user sees in the first hour, through the real CLI: the summary counts rows and
requests apart, the output's column order is the docs', `apply --no-cache`, and the quickstart
prints what the docs say it prints."""

from __future__ import annotations

import csv
import json
import re

from cli_helpers import ROOT, Terminal
from conftest import make_spec, write_csv

TEXTS = ["great", "awful", "great", "fine", "awful", "meh"]  # two texts repeat: 4 requests for 6 rows


def spec_with_repeats(workdir):
    spec = make_spec(workdir, rows=len(TEXTS))
    write_csv(workdir / "data.csv", [{"id": f"r{i}", "text": t} for i, t in enumerate(TEXTS)])
    return spec


def header(path) -> list[str]:
    with open(path, newline="", encoding="utf-8") as handle:
        return next(csv.reader(handle))


def test_summary_tells_rows_from_requests(workdir, fake, batchor_cli):
    spec = spec_with_repeats(workdir)
    first = batchor_cli(workdir, "apply", spec, "--yes")
    assert first.returncode == 0, first.stderr
    assert "4 to run (2 rows share a request with another row)" in first.stderr
    assert (
        "succeeded: 6 rows: 4 requests, 2 rows share an answer; requests 4 answered, 0 failed; rows 6 succeeded; "
        "0 rows cached"
    ) in first.stderr
    assert fake.stats()["requests"] == 4

    again = batchor_cli(workdir, "apply", spec, "--yes")
    assert again.returncode == 0, again.stderr
    summary = "succeeded: 6 rows: 0 requests; requests 0 answered, 0 failed; rows 6 succeeded; 6 rows cached, 0 skipped"
    assert summary in again.stderr
    assert fake.stats()["requests"] == 4


def test_output_columns_follow_the_readme_order(workdir, fake, batchor_cli):
    spec = make_spec(workdir, rows=2)
    assert batchor_cli(workdir, "apply", spec, "--yes").returncode == 0
    assert header(workdir / "out" / "results.csv") == [
        "id",
        "text",
        "classify.sentiment",
        "classify.score",
        "_row_key",
        "_status",
        "_error",
    ]
    tutorial = " ".join((ROOT / "docs" / "get-started" / "tutorial.md").read_text(encoding="utf-8").split())
    assert "then one column per answer field, then `_row_key`, `_status` and `_error`" in tutorial


def test_apply_no_cache_asks_every_request_again(workdir, fake, batchor_cli):
    spec = make_spec(workdir, rows=3)
    assert batchor_cli(workdir, "apply", spec, "--yes").returncode == 0
    cached = batchor_cli(workdir, "apply", spec, "--yes")
    assert "3 rows cached" in cached.stderr and fake.stats()["requests"] == 3

    fresh = batchor_cli(workdir, "apply", spec, "--yes", "--no-cache")
    assert fresh.returncode == 0, fresh.stderr
    summary = "succeeded: 3 rows: 3 requests; requests 3 answered, 0 failed; rows 3 succeeded; 0 rows cached"
    assert summary in fresh.stderr
    assert fake.stats()["requests"] == 6


def test_quickstart_prints_what_the_docs_say(workdir, fake, batchor_cli):
    result = batchor_cli(
        workdir,
        "apply",
        ROOT / "specs" / "reviews.yaml",
        "--mock",
        "--yes",
        "--output",
        workdir / "reviews.csv",
        "--state",
        workdir / "state.duckdb",
    )
    assert result.returncode == 0, result.stderr
    summary = re.search(r"succeeded: (300 rows: 276 requests, 24 rows share an answer);", result.stderr)
    assert summary, result.stderr
    install = " ".join((ROOT / "docs" / "get-started" / "install.md").read_text(encoding="utf-8").split())
    assert f"`{summary.group(1)}`" in install


def test_results_without_output_prints_csv_to_a_pipe(workdir, fake, batchor_cli):
    spec = make_spec(workdir, rows=3)
    assert batchor_cli(workdir, "apply", spec, "--yes").returncode == 0
    printed = batchor_cli(workdir, "results")
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == (workdir / "out" / "results.csv").read_text(encoding="utf-8")
    lines = batchor_cli(workdir, "results", "--json").stdout.splitlines()
    assert [json.loads(line)["_row_key"] for line in lines] == ["r0", "r1", "r2"]
    written = batchor_cli(workdir, "results", "-o", workdir / "copy.parquet")
    assert written.returncode == 0 and (workdir / "copy.parquet").exists()


def test_results_on_a_terminal_shows_the_first_rows_readably(workdir, fake, batchor_cli):
    spec = make_spec(workdir, rows=5)
    assert batchor_cli(workdir, "apply", spec, "--yes").returncode == 0
    terminal = Terminal(workdir, "results", "--head", "2")
    assert terminal.finish() == 0, terminal.screen
    screen = terminal.screen.replace("\r\n", "\n")
    assert "-- row 1\n  id                  r0\n  text                review number 0\n" in screen
    assert "-- row 2\n" in screen and "-- row 3" not in screen
    assert "2 of 5 rows shown" in screen
