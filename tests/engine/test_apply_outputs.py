"""Apply with the real openai SDK against the fake server: output files in every format, text
steps, dependent steps, cached re-runs and the offline mock."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import duckdb
import jsonschema
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import SENTIMENT_SCHEMA, make_spec

from batchor import api
from batchor.errors import NoApiKeyError

STATE = Path(".batchor") / "state.duckdb"


def stored_answers(workdir: Path, step: str) -> dict[str, dict]:
    """row key -> parsed answer, read straight from the state file."""
    with duckdb.connect(str(workdir / STATE), read_only=True) as db:
        rows = db.execute(
            "SELECT j.row_key, r.output FROM job_requests j JOIN results r USING (request_key) "
            "WHERE j.step = ? AND r.status = 'succeeded'",
            [step],
        ).fetchall()
    return {key: json.loads(output) for key, output in rows}


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_structured_output_in_csv_parquet_and_jsonl(workdir, fake):
    spec = make_spec(workdir, rows=6)
    outcome = api.apply(spec, handle_signals=False)
    assert outcome.status == "succeeded" and fake.stats()["requests"] == 6
    answers = stored_answers(workdir, "classify")
    assert len(answers) == 6

    rows = read_csv(workdir / "out" / "results.csv")
    assert list(rows[0]) == [
        "id",
        "text",
        "classify.sentiment",
        "classify.score",
        "_row_key",
        "_status",
        "_error",
    ]
    assert [r["id"] for r in rows] == [f"r{i}" for i in range(6)]
    for row in rows:
        assert row["_row_key"] == row["id"]
        assert (row["_status"], row["_error"]) == ("succeeded", "")
        expected = answers[row["_row_key"]]
        assert (row["classify.sentiment"], int(row["classify.score"])) == (
            expected["sentiment"],
            expected["score"],
        )

    fake.reset()
    api.apply(spec, output=workdir / "out" / "results.parquet", handle_signals=False)
    table = pq.read_table(workdir / "out" / "results.parquet")
    assert table.schema.field("classify.score").type == pa.int64()
    assert table.schema.field("classify.sentiment").type == pa.string()
    assert table.schema.field("id").type == pa.string()
    parquet_rows = table.to_pylist()
    for row in parquet_rows:
        expected = answers[row["_row_key"]]
        assert (row["classify.sentiment"], row["classify.score"]) == (
            expected["sentiment"],
            expected["score"],
        )
        assert (row["_status"], row["_error"]) == ("succeeded", None)

    api.apply(spec, output=workdir / "out" / "results.jsonl", handle_signals=False)
    lines = [json.loads(line) for line in (workdir / "out" / "results.jsonl").read_text().splitlines()]
    assert lines == parquet_rows
    assert fake.stats()["requests"] == 0  # the other formats came from the state


def test_text_output_step(workdir, fake):
    spec = make_spec(workdir, rows=3, schema=None)
    api.apply(spec, handle_signals=False)
    rows = read_csv(workdir / "out" / "results.csv")
    assert list(rows[0]) == ["id", "text", "classify", "_row_key", "_status", "_error"]
    # the fake answers text requests with "echo: " + the first 40 characters of the prompt
    assert [r["classify"] for r in rows] == [f"echo: Review: review number {i}" for i in range(3)]


def test_dependent_step_uses_the_first_answer(workdir, fake):
    spec = make_spec(
        workdir,
        rows=3,
        steps={
            "classify": {
                "prompt": "Review: {{ row.text }}",
                "output": {"schema": SENTIMENT_SCHEMA},
            },
            "reply": {"prompt": "Write to a {{ classify.sentiment }} customer"},
        },
    )
    outcome = api.apply(spec, handle_signals=False)
    assert outcome.status == "succeeded"
    answers = stored_answers(workdir, "classify")
    rows = read_csv(workdir / "out" / "results.csv")
    for row in rows:
        sentiment = answers[row["_row_key"]]["sentiment"]
        assert row["reply"] == f"echo: Write to a {sentiment} customer"[:46]
    assert len(set(fake.stats()["by_prompt"].values())) == 1


def test_reapply_of_a_finished_spec_makes_no_calls_and_the_same_bytes(workdir, fake):
    spec = make_spec(workdir, rows=5)
    api.apply(spec, handle_signals=False)
    first = (workdir / "out" / "results.csv").read_bytes()
    fake.reset()
    outcome = api.apply(spec, handle_signals=False)
    assert fake.stats()["requests"] == 0
    assert (outcome.status, outcome.cached, outcome.succeeded) == ("succeeded", 5, 0)
    assert (workdir / "out" / "results.csv").read_bytes() == first


def test_answers_are_shared_between_specs_by_request_key(workdir, fake):
    spec = make_spec(workdir, rows=4)
    api.apply(spec, handle_signals=False)
    renamed = (
        spec.read_text(encoding="utf-8")
        .replace("name: small", "name: renamed")
        .replace("concurrency: 8", "concurrency: 2")
        .replace("out/results.csv", "out/renamed.csv")
    )
    spec.write_text(renamed, encoding="utf-8")
    fake.reset()
    api.apply(spec, handle_signals=False)
    assert fake.stats()["requests"] == 0
    assert len(read_csv(workdir / "out" / "renamed.csv")) == 4


def test_mock_makes_no_calls_and_answers_match_the_schema(workdir, fake):
    spec = make_spec(workdir, rows=8)
    outcome = api.apply(spec, mock=True, output=workdir / "mock.parquet", handle_signals=False)
    assert outcome.status == "succeeded"
    assert fake.stats()["requests"] == 0
    for row in pq.read_table(workdir / "mock.parquet").to_pylist():
        answer = {"sentiment": row["classify.sentiment"], "score": row["classify.score"]}
        jsonschema.validate(answer, SENTIMENT_SCHEMA)


def test_mock_answers_do_not_count_as_real_ones(workdir, fake):
    spec = make_spec(workdir, rows=3)
    api.apply(spec, mock=True, handle_signals=False)
    api.apply(spec, handle_signals=False)
    assert fake.stats()["requests"] == 3


def test_missing_custom_key_variable_is_named_before_any_call(workdir, fake, monkeypatch):
    monkeypatch.delenv("TEAM_OPENAI_KEY", raising=False)
    spec = make_spec(workdir, rows=2)
    spec.write_text(
        spec.read_text(encoding="utf-8").replace(
            "  name: gpt-4.1-mini\n",
            "  name: gpt-4.1-mini\n  api_key_env: TEAM_OPENAI_KEY\n  allow_key_env: true\n",
        ),
        encoding="utf-8",
    )
    with pytest.raises(NoApiKeyError) as info:
        api.apply(spec, handle_signals=False)
    assert info.value.code == "no_api_key" and "TEAM_OPENAI_KEY" in info.value.message
    assert fake.stats()["requests"] == 0
