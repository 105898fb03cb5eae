"""Checks and golden-label metrics over real stored answers (mock provider, real DuckDB state).

Every expected figure is recomputed here in plain Python from the output file the same run wrote,
so the SQL in batchor/quality is checked against an independent implementation.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest
from conftest import make_spec, write_csv

import batchor
from batchor.errors import SpecError

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["label", "score", "tags", "note"],
    "properties": {
        "label": {"type": "string", "enum": ["a", "b", "c"]},
        "score": {"type": "integer", "minimum": 1, "maximum": 5},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["x", "y", "z"]}, "maxItems": 3},
        "note": {"type": "string", "maxLength": 30},
    },
}


def labelled_rows(n: int = 40) -> list[dict]:
    rows = []
    for i in range(n):
        rows.append(
            {
                "id": f"r{i}",
                "text": f"item {i}",
                "gold": "" if i % 7 == 0 else "abc"[i % 3],
                "want_score": str(1 + i % 5),
                "want_tags": "x; y" if i % 2 else " Z ",
                "want_note": f"sample note {i}" if i % 4 else "",
            }
        )
    return rows


def quality_spec(folder: Path, checks: list | None = None, step_checks: list | None = None, **changes) -> Path:
    spec = make_spec(folder, schema=SCHEMA, provider="mock", model="mock-1", **changes)
    write_csv(folder / "data.csv", labelled_rows())
    import yaml

    data = yaml.safe_load(spec.read_text())
    data["steps"]["classify"]["expected"] = {
        "label": "gold",
        "score": "want_score",
        "tags": "want_tags",
        "note": "want_note",
    }
    data["steps"]["classify"]["checks"] = step_checks or []
    data["checks"] = checks or []
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    return spec


def output(result) -> list[dict]:
    with open(result.output_path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_golden_metrics_match_an_independent_computation(workdir):
    result = batchor.apply(quality_spec(workdir), handle_signals=False)
    rows = output(result)
    metrics = {m.field: m for m in result.checks.metrics}
    labelled = [r for r in rows if r["gold"]]
    assert metrics["label"].labelled == len(labelled) < len(rows)  # unlabelled rows are left out
    pairs = Counter((r["gold"], r["classify.label"]) for r in labelled)
    assert metrics["label"].confusion == sorted((e, a, n) for (e, a), n in pairs.items())
    assert metrics["label"].values["accuracy"] == pytest.approx(
        sum(n for (e, a), n in pairs.items() if e == a) / len(labelled)
    )
    for cls in "abc":
        tp = pairs[(cls, cls)]
        predicted = sum(n for (_, a), n in pairs.items() if a == cls)
        actual = sum(n for (e, _), n in pairs.items() if e == cls)
        assert metrics["label"].values[f"precision.{cls}"] == pytest.approx(tp / predicted if predicted else 0)
        assert metrics["label"].values[f"recall.{cls}"] == pytest.approx(tp / actual if actual else 0)
    mae = sum(abs(int(r["classify.score"]) - int(r["want_score"])) for r in rows) / len(rows)
    assert metrics["score"].values["mae"] == pytest.approx(mae)


def test_set_and_string_metrics(workdir):
    result = batchor.apply(quality_spec(workdir), handle_signals=False)
    rows = output(result)
    metrics = {m.field: m for m in result.checks.metrics}
    hits = answered = wanted = 0
    for r in rows:
        got = {t.lower() for t in json.loads(r["classify.tags"])}
        want = {
            t.strip().lower()
            for t in (json.loads(r["want_tags"]) if r["want_tags"].startswith("[") else r["want_tags"].split(";"))
        }
        hits, answered, wanted = hits + len(got & want), answered + len(got), wanted + len(want)
    assert metrics["tags"].values["precision"] == pytest.approx(hits / answered)
    assert metrics["tags"].values["recall"] == pytest.approx(hits / wanted)
    notes = [r for r in rows if r["want_note"]]
    assert metrics["note"].labelled == len(notes)
    exact = sum(r["classify.note"] == r["want_note"] for r in notes) / len(notes)
    assert metrics["note"].values["exact"] == pytest.approx(exact)
    normalized = sum(" ".join(r["classify.note"].lower().split()) == r["want_note"] for r in notes) / len(notes)
    assert metrics["note"].values["normalized"] == pytest.approx(normalized)


def test_row_checks_in_sql_and_jinja_count_the_rows_that_fail(workdir):
    checks = [
        {"name": "score sql", "sql": "classify.score >= 3"},
        {"name": "score jinja", "row": "classify.score >= 3 and row.text.startswith('item')"},
        {"name": "most scores", "sql": "classify.score >= 3", "min_share": 0.1},
    ]
    result = batchor.apply(quality_spec(workdir, step_checks=checks), handle_signals=False)
    rows = output(result)
    low = [r["_row_key"] for r in rows if int(r["classify.score"]) < 3]
    assert low, "the mock answers give some low scores"
    by_name = {c.name: c for c in result.checks.checks}
    for name in ("score sql", "score jinja"):
        outcome = by_name[name]
        assert (outcome.passed, outcome.rows, outcome.failing) == (False, len(rows), len(low))
        assert [e["_row_key"] for e in outcome.examples] == low[:3]
        assert all(e["classify"]["score"] < 3 for e in outcome.examples)
    assert by_name["most scores"].passed and by_name["most scores"].value == pytest.approx(1 - len(low) / len(rows))
    assert not result.checks.passed


def test_distribution_aggregate_and_metric_thresholds(workdir):
    checks = [
        {"distribution": "classify.label", "max_share": 0.9},
        {"distribution": "classify.label", "max_share": 0.2, "name": "too strict"},
        {"aggregate": "avg(classify.score)", "min": 1, "max": 5},
        {"aggregate": "avg(classify.score)", "min": 5.5, "name": "impossible mean"},
        {"metric": "classify.label.accuracy", "min": 0.0},
        {"metric": "classify.label.accuracy", "min": 1.01, "name": "perfect"},
    ]
    result = batchor.apply(quality_spec(workdir, checks=checks), handle_signals=False)
    rows = output(result)
    top = Counter(r["classify.label"] for r in rows).most_common(1)[0][1] / len(rows)
    verdicts = {c.name: c.passed for c in result.checks.checks}
    assert verdicts == {
        "classify.label": True,
        "too strict": False,
        "avg(classify.score)": True,
        "impossible mean": False,
        "classify.label.accuracy": True,
        "perfect": False,
    }
    assert result.checks.checks[0].value == pytest.approx(top)
    mean = sum(int(r["classify.score"]) for r in rows) / len(rows)
    assert result.checks.checks[2].value == pytest.approx(mean)


def test_check_reruns_on_stored_answers_with_the_specs_current_checks(workdir, fake):
    spec = quality_spec(workdir)
    batchor.apply(spec, handle_signals=False)
    before = batchor.check(spec)
    assert before.checks == [] and before.passed
    spec = quality_spec(workdir, checks=[{"sql": "classify.score > 5"}])  # edit the checks only
    report = batchor.check(spec)
    assert [c.passed for c in report.checks] == [False]
    assert fake.stats()["requests"] == 0


@pytest.mark.parametrize(
    "check, message",
    [
        ({"sql": "no_such_column > 1"}, "no_such_column"),
        ({"row": "nostep.x > 1"}, "nostep"),
        ({"metric": "classify.text.accuracy", "min": 0.5}, "needs golden labels"),
        ({"metric": "classify.label.mae", "min": 0.5}, "no metric 'mae'"),
    ],
)
def test_bad_checks_are_spec_errors_that_name_the_check(workdir, check, message):
    spec = quality_spec(workdir, checks=[check])
    with pytest.raises(SpecError, match=message):
        batchor.apply(spec, handle_signals=False)


@pytest.mark.parametrize(
    "check, message",
    [
        ({"sql": "1", "row": "1"}, "exactly one of"),
        ({"aggregate": "avg(1)"}, "needs a threshold"),
        ({"distribution": "x"}, "go together"),
        ({"sql": "1", "min": 1}, "bound an `aggregate`"),
    ],
)
def test_malformed_checks_fail_when_the_spec_loads(workdir, check, message):
    spec = quality_spec(workdir, checks=[check])
    with pytest.raises(SpecError, match=message):
        batchor.validate(spec)


def test_expected_must_name_a_field_and_a_column(workdir):
    import yaml

    spec = quality_spec(workdir)
    data = yaml.safe_load(spec.read_text())
    data["steps"]["classify"]["expected"] = {"label": "no_such_column"}
    spec.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError, match="no_such_column"):
        batchor.apply(spec, handle_signals=False)


def test_a_bad_check_is_refused_before_any_call(workdir, fake):
    spec = quality_spec(workdir, checks=[{"sql": "classify.no_such_field > 1"}])
    import yaml

    data = yaml.safe_load(spec.read_text())
    data["model"] = {"provider": "openai", "name": "gpt-4.1-mini"}
    spec.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError, match="no_such_field"):
        batchor.apply(spec, handle_signals=False)
    assert fake.stats()["requests"] == 0
