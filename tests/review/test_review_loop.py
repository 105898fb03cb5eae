"""The review loop end to end, through the CLI against the fake provider: export 20 low-confidence
rows of a golden-label job, correct 5 of them, import. Exactly those 5 output values change (and
say `_reviewed`), `check`'s accuracy becomes the one recomputed here in plain Python with the
reviewed values as labels, and both survive `apply --refresh`. A file that does not match the job
is refused with a code and stores nothing."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import duckdb
import pytest
from conftest import SENTIMENT_SCHEMA, make_spec, write_csv

LABELS = ["positive", "negative", "mixed"]
ROWS = 80


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture
def job(workdir, fake, monkeypatch):
    monkeypatch.chdir(workdir)
    monkeypatch.delenv("BATCHOR_STATE", raising=False)
    steps = {"classify": {"prompt": "Review: {{ row.text }}", "output": {"schema": SENTIMENT_SCHEMA}}}
    steps["classify"]["expected"] = {"sentiment": "label"}
    spec = make_spec(workdir, rows=ROWS, steps=steps)
    write_csv(
        workdir / "data.csv",
        [{"id": f"r{i:02d}", "text": f"review number {i}", "label": LABELS[i % 3]} for i in range(ROWS)],
    )
    return spec


def accuracy(rows: list[dict[str, str]], reviewed: dict[str, str]) -> float:
    """The model's answers against the labels, a reviewed value replacing the input's label."""
    pairs = [(r["classify.sentiment"], reviewed.get(r["_row_key"], r["label"])) for r in rows]
    return sum(a == b for a, b in pairs) / len(pairs)


def check_accuracy(batchor_cli, workdir: Path, spec: Path) -> float:
    done = batchor_cli(workdir, "check", str(spec), "--json")
    (metric,) = json.loads(done.stdout)["metrics"]
    assert metric["field"] == "classify.sentiment"
    return metric["metrics"]["accuracy"]


def test_a_review_round_trip_changes_exactly_the_corrected_values(job, workdir, batchor_cli):
    spec = job
    assert batchor_cli(workdir, "apply", str(spec), "--yes").returncode == 0
    before = read_csv(workdir / "out" / "results.csv")
    assert "_reviewed" not in before[0]  # a job without reviews keeps its columns
    assert check_accuracy(batchor_cli, workdir, spec) == pytest.approx(accuracy(before, {}))

    review = workdir / "review.csv"
    done = batchor_cli(
        workdir, "review", "export", str(spec), "--where", "classify.score <= 3", "--sample", "20", "-o", str(review)
    )
    assert done.returncode == 0, done.stderr
    exported = read_csv(review)
    assert len(exported) == 20 and all(int(r["score"]) <= 3 for r in exported)
    assert {
        "_job",
        "_step",
        "_row_key",
        "text",
        "label",
        "sentiment",
        "_model",
        "review.sentiment",
        "review.score",
    } <= set(exported[0])
    assert all(r["review.sentiment"] == "" and r["_model"] == "openai:gpt-4.1-mini" for r in exported)

    corrected = {}
    for row in exported[:5]:  # a value the model did not give, and not the input's label either
        row["review.sentiment"] = next(v for v in LABELS if v not in (row["sentiment"], row["label"]))
        corrected[row["_row_key"]] = row["review.sentiment"]
    with review.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(exported[0]))
        writer.writeheader()
        writer.writerows(exported)
    done = batchor_cli(workdir, "review", "import", str(review), "--reviewer", "ada")
    assert done.returncode == 0, done.stderr
    assert "stored 5 reviewed label(s)" in done.stdout

    after = read_csv(workdir / "out" / "results.csv")
    changed = {b["_row_key"] for b, a in zip(before, after) if b["classify.sentiment"] != a["classify.sentiment"]}
    assert changed == set(corrected)
    assert all(a["classify.sentiment"] == corrected[a["_row_key"]] for a in after if a["_row_key"] in corrected)
    assert {a["_row_key"] for a in after if a["_reviewed"]} == set(corrected)
    assert [a["_reviewed"] for a in after if a["_reviewed"]] == ["classify: sentiment"] * 5
    expected = accuracy(before, corrected)
    assert expected != accuracy(before, {})
    assert check_accuracy(batchor_cli, workdir, spec) == pytest.approx(expected)

    with duckdb.connect(str(workdir / ".batchor" / "state.duckdb"), read_only=True) as db:
        stored = db.execute(
            "SELECT reviewer, source_file, length(source_sha256), reviewed_at IS NOT NULL FROM reviews"
        ).fetchall()
    assert stored == [("ada", str(review.resolve()), 64, True)] * 5

    assert batchor_cli(workdir, "apply", str(spec), "--refresh", "classify", "--yes").returncode == 0
    refreshed = read_csv(workdir / "out" / "results.csv")
    assert {r["_row_key"]: r["classify.sentiment"] for r in refreshed if r["_row_key"] in corrected} == corrected
    assert check_accuracy(batchor_cli, workdir, spec) == pytest.approx(expected)


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda rows: rows[0].update(_row_key="nope"), "not rows of job"),
        (lambda rows: rows[1].update({"review.sentiment": "furious"}), "not a valid sentiment"),
        (lambda rows: [r.update({"review.colour": "red"}) for r in rows], "unknown review column"),
    ],
)
def test_a_file_that_does_not_match_stores_nothing(job, workdir, batchor_cli, change, message):
    spec = job
    assert batchor_cli(workdir, "apply", str(spec), "--yes").returncode == 0
    review = workdir / "review.jsonl"
    assert batchor_cli(workdir, "review", "export", str(spec), "--sample", "3", "-o", str(review)).returncode == 0
    rows = [json.loads(line) for line in review.read_text().splitlines()]
    rows[2]["review.sentiment"] = "mixed"  # a good correction, before the bad one: not stored either
    change(rows)
    review.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = batchor_cli(workdir, "review", "import", str(review))
    assert done.returncode == 64 and "review_file_mismatch" in done.stderr and message in done.stderr
    with duckdb.connect(str(workdir / ".batchor" / "state.duckdb"), read_only=True) as db:
        assert db.execute("SELECT count(*) FROM reviews").fetchone() == (0,)


def test_the_filter_is_one_expression_over_the_answers(job, workdir, batchor_cli):
    spec = job
    assert batchor_cli(workdir, "apply", str(spec), "--yes").returncode == 0
    for where in ("true; DROP TABLE answers", "_row_key IN (SELECT * FROM read_csv('data.csv'))"):
        done = batchor_cli(workdir, "review", "export", str(spec), "--where", where, "-o", str(workdir / "r.csv"))
        assert done.returncode == 64 and "review_filter_invalid" in done.stderr
