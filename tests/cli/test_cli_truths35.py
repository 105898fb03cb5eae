"""Output-path guards, reserved input columns and commands that say what they do (issue 35).

Each test failed on the code before: an output path naming the state replaced the state with the
results (exit 0), one naming the input overwrote it, `--state` at someone else's DuckDB file got
batchor's tables written into it, `_status` in the input became `_status_1`, `check --json`
printed two JSON documents, a missing key left a `failed` run, `1 rows cached`."""

from __future__ import annotations

import json

import duckdb
import yaml
from conftest import make_spec, write_csv


def _edit(spec, edit) -> None:
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    edit(data)
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def _runs(workdir, batchor_cli) -> list[dict]:
    listed = batchor_cli(workdir, "runs", "--json")
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)


def test_an_output_path_naming_the_state_is_refused_before_anything_is_written(workdir, batchor_cli):
    spec = make_spec(workdir, rows=2)
    assert batchor_cli(workdir, "apply", spec, "--mock", "--yes").returncode == 0
    state = workdir / ".batchor" / "state.duckdb"
    before = state.read_bytes()
    _edit(spec, lambda data: data.update(output={"path": ".batchor/state.duckdb"}))
    planned = batchor_cli(workdir, "plan", spec)
    assert planned.returncode != 0 and "error [output_conflict]" in planned.stderr, planned.stderr
    assert "is the state file" in planned.stderr
    _edit(spec, lambda data: data.update(output={"path": "out/results.csv"}))
    applied = batchor_cli(workdir, "apply", spec, "--mock", "--yes", "--output", state)
    assert applied.returncode != 0 and "error [output_conflict]" in applied.stderr, applied.stderr
    assert state.read_bytes() == before  # cache, ledger and history untouched
    assert [r["status"] for r in _runs(workdir, batchor_cli)] == ["succeeded"]


def test_an_output_path_naming_the_input_is_refused_at_validate_and_plan(workdir, batchor_cli):
    spec = make_spec(workdir, rows=2)
    data = (workdir / "data.csv").read_bytes()
    _edit(spec, lambda d: d.update(output={"path": "data.csv"}))
    for command in (["validate", spec], ["plan", spec], ["apply", spec, "--yes"]):
        result = batchor_cli(workdir, *command)
        assert result.returncode != 0 and "error [output_conflict]" in result.stderr, (command, result.stderr)
        assert "is the input file" in result.stderr
    assert (workdir / "data.csv").read_bytes() == data


def test_a_state_that_is_someone_elses_duckdb_file_is_refused(workdir, batchor_cli):
    spec = make_spec(workdir, rows=2)
    other = workdir / "sales.duckdb"
    with duckdb.connect(str(other)) as db:
        db.execute("CREATE TABLE sales AS SELECT 1 AS amount")
    result = batchor_cli(workdir, "plan", spec, "--mock", "--state", other)
    assert result.returncode != 0 and "error [state_foreign]" in result.stderr, result.stderr
    assert "batchor did not create (tables: sales)" in result.stderr
    with duckdb.connect(str(other), read_only=True) as db:
        assert db.execute("SHOW TABLES").fetchall() == [("sales",)]  # nothing of batchor's written


def test_input_columns_batchor_adds_to_the_output_are_refused_as_reserved(workdir, batchor_cli):
    spec = make_spec(workdir, rows=2)
    for column in ("_status", "_error", "_row_key"):
        write_csv(
            workdir / "data.csv", [{"id": "r1", "text": "a", column: "x"}, {"id": "r2", "text": "b", column: "y"}]
        )
        result = batchor_cli(workdir, "validate", spec)
        assert result.returncode != 0 and "error [input_invalid]" in result.stderr, (column, result.stderr)
        assert f"column name(s) {column} are reserved" in result.stderr
        assert "rename in input.sql" in result.stderr


def _with_failing_check(workdir, batchor_cli, name: str):
    spec = make_spec(workdir, rows=2)
    _edit(spec, lambda d: d["steps"]["classify"].update(checks=[{"name": name, "sql": "classify.score > 99"}]))
    applied = batchor_cli(workdir, "apply", spec, "--mock", "--yes")
    assert applied.returncode == 9, applied.stderr  # the gate fails: checks_failed
    return spec


def test_check_json_prints_exactly_one_json_document(workdir, batchor_cli):
    _with_failing_check(workdir, batchor_cli, "big scores")
    result = batchor_cli(workdir, "check", "--json")
    assert result.returncode == 9
    report = json.loads(result.stdout)  # one document: a second one made this raise
    assert report["passed"] is False and report["checks"][0]["name"] == "big scores"
    assert "error [checks_failed]" in result.stderr


def test_the_markdown_check_report_escapes_check_names(workdir, batchor_cli):
    _with_failing_check(workdir, batchor_cli, "a|b **loud** </code><img src=x>")
    result = batchor_cli(workdir, "check", "--format", "markdown")
    assert result.returncode == 9
    assert "<img" not in result.stdout and "</code><" not in result.stdout
    assert r"a\|b \*\*loud\*\* &lt;/code&gt;&lt;img src=x&gt;" in result.stdout


def test_a_configuration_failure_records_no_failed_run(workdir, batchor_cli):
    spec = make_spec(workdir, rows=2)
    result = batchor_cli(workdir, "apply", spec, "--yes", env={"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None})
    assert result.returncode != 0 and "error [no_api_key]" in result.stderr, result.stderr
    assert [r for r in _runs(workdir, batchor_cli) if r["status"] == "failed"] == []


def test_counts_of_one_read_in_the_singular(workdir, batchor_cli):
    spec = make_spec(workdir, rows=1)
    assert batchor_cli(workdir, "apply", spec, "--mock", "--yes").returncode == 0
    again = batchor_cli(workdir, "apply", spec, "--mock", "--yes")
    assert "1 row cached" in again.stderr and "1 rows" not in again.stderr, again.stderr
    assert "succeeded: 1 row: 0 requests;" in again.stderr


def test_prune_says_what_it_does(workdir, batchor_cli):
    helped = batchor_cli(workdir, "prune", "--help")
    assert "only gets smaller with --compact" in " ".join(helped.stdout.split())
    spec = make_spec(workdir, rows=2)
    assert batchor_cli(workdir, "apply", spec, "--mock", "--yes").returncode == 0
    pruned = batchor_cli(workdir, "prune")
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout.startswith("Dropped ") and ": " not in pruned.stdout.split(".")[0]
    assert "`batchor prune --compact` shrinks it" in pruned.stdout
