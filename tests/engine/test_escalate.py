"""Cascades (`escalate:`): the stronger model is asked only for rows whose own answer meets the
condition; each row has exactly one answer downstream (SQL included) and `_model` says whose.
Mock provider (deterministic answers), real DuckDB."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
import yaml

from batchor import api
from batchor.errors import BatchorError

SCHEMA = {
    "type": "object",
    "properties": {"sentiment": {"type": "string"}, "confidence": {"type": "number", "minimum": 0, "maximum": 1}},
    "required": ["sentiment", "confidence"],
}


def cascade_spec(workdir: Path, when: str = "triage.confidence < 0.5") -> Path:
    (workdir / "data.csv").write_text("id,text\n" + "".join(f"r{i},review {i}\n" for i in range(20)))
    spec = {
        "version": 1,
        "name": "cascade",
        "input": {"path": "data.csv", "key": "id"},
        "model": {"provider": "openai", "name": "gpt-4.1-mini"},
        "steps": {
            "triage": {
                "prompt": "Review: {{ row.text }}",
                "output": {"schema": SCHEMA},
                "escalate": {"to": "openai:gpt-4.1", "when": when},
            },
            "merged": {"sql": "SELECT _row_key, triage.sentiment AS sentiment FROM rows"},
        },
        "output": {"path": "out/out.parquet"},
    }
    path = workdir / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_only_rows_meeting_the_condition_are_asked_again_and_each_keeps_one_answer(workdir):
    result = api.apply(cascade_spec(workdir), mock=True, handle_signals=False)
    rows = pq.read_table(result.output_path).to_pylist()
    assert len(rows) == 20 and len({r["_row_key"] for r in rows}) == 20
    with duckdb.connect(str(workdir / ".batchor" / "state.duckdb"), read_only=True) as db:
        own = db.execute(
            "SELECT output, answered_by IS NOT NULL FROM results WHERE model = 'mock:gpt-4.1-mini'"
        ).fetchall()
    cheap = [(json.loads(output)["confidence"], escalated) for output, escalated in own]
    assert len(cheap) == 20 and {escalated for _, escalated in cheap} == {True, False}
    assert all(escalated == (confidence < 0.5) for confidence, escalated in cheap)
    strong = [r for r in rows if r["_model"] == "mock:gpt-4.1"]
    assert len(strong) == sum(escalated for _, escalated in cheap)
    assert {r["_model"] for r in rows} == {"mock:gpt-4.1", "mock:gpt-4.1-mini"}
    assert all(r["merged.sentiment"] == r["triage.sentiment"] for r in rows)  # SQL reads the kept answer


def test_the_condition_reads_only_the_steps_own_answer(workdir):
    with pytest.raises(BatchorError) as info:
        api.validate(cascade_spec(workdir, when="row.text == 'x'"))
    assert "reads row" in info.value.message
