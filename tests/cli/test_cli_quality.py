"""`batchor check`, `batchor diff` and the checks after `apply`, through the real command line."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
import yaml
from cli_helpers import ROOT, ndjson

import batchor

JUDGED = ROOT / "specs" / "reviews_judged.yaml"


def copy_example(folder: Path, name: str = "judged.yaml", **prompt_change: str) -> Path:
    """The judged example with its data next to it (so tests never write into the repository)."""
    (folder / "examples" / "data").mkdir(parents=True, exist_ok=True)
    (folder / ".batchor").mkdir(exist_ok=True)  # the project's state folder: the spec in specs/ finds it
    (folder / "schemas").mkdir(exist_ok=True)
    shutil.copy(ROOT / "examples" / "data" / "reviews_labelled.csv", folder / "examples" / "data")
    for schema in ("review.schema.json", "reply_grade.schema.json"):
        shutil.copy(ROOT / "schemas" / schema, folder / "schemas")
    spec = yaml.safe_load(JUDGED.read_text())
    spec["output"]["path"] = str(folder / "out" / f"{name}.csv")
    for step, suffix in prompt_change.items():
        spec["steps"][step]["prompt"] += suffix
    (folder / "specs").mkdir(exist_ok=True)
    path = folder / "specs" / name
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_apply_prints_checks_and_exits_9_when_one_fails(workdir, batchor_cli):
    spec = copy_example(workdir)
    result = batchor_cli(workdir, "apply", spec, "--mock", "--yes")
    assert result.returncode == 9, result.stderr
    assert "FAIL  classify: sentiment accuracy" in result.stderr
    assert "Traceback" not in result.stderr
    # the answers are kept: checking again reads them without a call and gives the same verdict
    again = batchor_cli(workdir, "check", spec, "--json")
    assert again.returncode == 9
    report = json.loads(again.stdout)  # one JSON document: the report; the verdict goes to stderr
    assert "error [checks_failed]: 1 of 8 checks failed: sentiment accuracy" in again.stderr
    assert not report["passed"] and report["run_id"]
    assert {c["name"] for c in report["checks"] if not c["passed"]} == {"sentiment accuracy"}
    metrics = {m["field"]: m for m in report["metrics"]}
    assert metrics["classify.sentiment"]["labelled"] == 54  # 6 of the 60 rows have no label
    assert sum(c["rows"] for c in metrics["classify.sentiment"]["confusion"]) == 54


def test_apply_json_emits_a_checks_event(workdir, batchor_cli):
    spec = copy_example(workdir)
    result = batchor_cli(workdir, "apply", spec, "--mock", "--yes", "--json")
    assert result.returncode == 9
    events = [e for e in ndjson(result.stdout) if e.get("event") == "checks"]
    assert len(events) == 1 and events[0]["passed"] is False


def test_check_markdown_for_a_pr_comment(workdir, batchor_cli):
    spec = copy_example(workdir)
    batchor_cli(workdir, "apply", spec, "--mock", "--yes")
    result = batchor_cli(workdir, "check", "--format", "markdown")  # the latest run
    assert result.returncode == 9
    assert result.stdout.startswith("### batchor checks")
    assert "| ❌ | classify | sentiment accuracy |" in result.stdout  # the name escaped as text
    assert "| expected \\ answered |" in result.stdout


def test_passing_checks_exit_0(workdir, batchor_cli):
    spec = copy_example(workdir)
    data = yaml.safe_load(spec.read_text())
    data["steps"]["classify"]["checks"] = [{"distribution": "classify.sentiment", "max_share": 0.9}]
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    assert batchor_cli(workdir, "apply", spec, "--mock", "--yes").returncode == 0
    result = batchor_cli(workdir, "check", spec)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS  classify" in result.stdout


def test_bad_check_is_a_coded_error_before_any_call(workdir, batchor_cli):
    spec = copy_example(workdir)
    data = yaml.safe_load(spec.read_text())
    data["checks"] = [{"sql": "length(classify.nope) > 0"}]
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    result = batchor_cli(workdir, "apply", spec, "--mock", "--yes")
    assert result.returncode == 1
    assert "error [spec_invalid]" in result.stderr and "nope" in result.stderr
    assert "Traceback" not in result.stderr
    assert batchor_cli(workdir, "runs", "--json").stdout.strip() == "[]"


def test_check_without_runs_names_the_fix(workdir, batchor_cli):
    result = batchor_cli(workdir, "check")
    assert result.returncode == 1
    assert "error [no_state]" in result.stderr and "batchor apply SPEC" in result.stderr  # nothing ran here yet
    assert not (workdir / ".batchor").exists()


def outputs(path: Path) -> dict[str, dict]:
    with path.open(newline="", encoding="utf-8") as handle:
        return {r["_row_key"]: r for r in csv.DictReader(handle)}


def test_diff_two_prompt_versions_on_a_sample(workdir, batchor_cli):
    v1 = copy_example(workdir, "v1.yaml")
    v2 = copy_example(workdir, "v2.yaml", classify="Be careful with mixed reviews.\n")
    for spec in (v1, v2):
        assert batchor_cli(workdir, "apply", spec, "--mock", "--yes", "--sample", "20").returncode in (0, 9)
    result = batchor_cli(workdir, "diff", v1, v2, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    a, b = (outputs(workdir / "out" / f"{v}.yaml.sample-20.mock.csv") for v in ("v1", "v2"))  # beside the spec output
    assert len(a) == len(b) == 20 and set(a) == set(b)  # the same seeded sample on both sides
    classify = next(s for s in report["steps"] if s["step"] == "classify")
    fields = ("classify.sentiment", "classify.topics", "classify.rating_guess")
    changed = [k for k in a if any(a[k][f] != b[k][f] for f in fields)]
    assert classify["compared"] == 20 and classify["changed"] == len(changed) > 0
    sentiment = next(f for f in classify["fields"] if f["field"] == "sentiment")
    assert sentiment["agree"] == sum(a[k]["classify.sentiment"] == b[k]["classify.sentiment"] for k in a)
    assert sum(c["rows"] for c in sentiment["confusion"]) == 20
    assert {m["metric"] for m in classify["metrics"]} >= {"sentiment.accuracy", "rating_guess.mae"}
    assert [e["_row_key"] for e in classify["examples"]] == sorted(changed)[:5]
    text = batchor_cli(workdir, "diff", v1, v2)
    assert "step classify: 20 rows compared" in text.stdout
    markdown = batchor_cli(workdir, "diff", v1, v2, "--format", "markdown")
    assert markdown.stdout.startswith("### batchor diff")


def test_python_api_check_and_diff(workdir, batchor_cli):
    spec = copy_example(workdir)
    first = batchor.apply(spec, mock=True, handle_signals=False)
    assert first.checks is not None and not first.checks.passed
    report = batchor.check(first.run_id)
    assert [c.passed for c in report.checks] == [c.passed for c in first.checks.checks]
    same = batchor.diff(first.run_id, spec)
    assert all(s.changed == 0 and s.compared == s.rows_a for s in same.steps)


def test_judged_example_runs_online_against_the_fake(workdir, fake, batchor_cli):
    """The real openai SDK against the fake: the judge reads the replies, its score is a gate."""
    result = batchor.apply(copy_example(workdir), handle_signals=False)
    assert result.status == "succeeded"
    report = result.checks
    assert report is not None and {c.scope for c in report.checks} == {"job", "classify", "reply", "judge"}
    judged = next(c for c in report.checks if c.name == "mean judge score")
    replies = next(c for c in report.checks if c.name == "reply under 600 characters")
    assert judged.rows == replies.rows > 0  # one grade per reply
    rows = list(outputs(Path(result.output_path)).values())
    scores = [int(r["judge.score"]) for r in rows if r["judge.score"]]
    assert judged.value == sum(scores) / len(scores)
    sent = fake.stats()["by_endpoint"]["openai.chat_completions"]  # identical prompts are sent once
    assert len(rows) <= sent <= len(rows) + 2 * len(scores)


def _labelled_input(folder: Path, with_label: bool) -> None:
    """The first 20 labelled reviews, with or without their golden-label column `gold`."""
    rows = list(csv.DictReader((ROOT / "examples" / "data" / "reviews_labelled.csv").open()))[:20]
    columns = ["review_id", "product", "text"] + (["gold"] if with_label else [])
    with (folder / "reviews.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, columns)
        writer.writeheader()
        for row in rows:
            writer.writerow(
                {**{c: row.get(c) for c in columns[:3]}, **({"gold": row["gold_sentiment"]} if with_label else {})}
            )


def _golden_spec(folder: Path, keyed: bool, expected: bool) -> Path:
    classify: dict = {
        "prompt": "Review: {{ row.text }}",
        "output": {
            "schema": {
                "type": "object",
                "properties": {"sentiment": {"type": "string", "enum": ["positive", "negative", "neutral"]}},
                "required": ["sentiment"],
            }
        },
    }
    if expected:
        classify["expected"] = {"sentiment": "gold"}
    spec = {
        "version": 1,
        "name": "golden_later",
        "input": {"path": "reviews.csv", **({"key": "review_id"} if keyed else {})},
        "model": {"provider": "openai", "name": "gpt-4.1-mini"},
        "steps": {"classify": classify},
        "output": {"path": "out.csv"},
    }
    path = folder / "golden.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.mark.parametrize("keyed", [True, False], ids=["input-key", "content-key"])
def test_check_spec_reads_a_golden_column_added_after_the_run(workdir, batchor_cli, keyed):
    """Issue 35: the label column is added to the input (and `expected:` to the spec) after the
    run; `check SPEC` reads it from the input now, joined by row key, without a new run."""
    _labelled_input(workdir, with_label=False)
    spec = _golden_spec(workdir, keyed, expected=False)
    assert batchor_cli(workdir, "apply", spec, "--mock", "--yes").returncode == 0
    _labelled_input(workdir, with_label=True)
    _golden_spec(workdir, keyed, expected=True)
    result = batchor_cli(workdir, "check", spec, "--json")
    assert result.returncode == 0, result.stderr
    (metric,) = json.loads(result.stdout)["metrics"]
    labelled = sum(1 for r in csv.DictReader((workdir / "reviews.csv").open()) if r["gold"])
    assert metric["field"] == "classify.sentiment" and metric["labelled"] == labelled > 0
    assert sum(c["rows"] for c in metric["confusion"]) == labelled
