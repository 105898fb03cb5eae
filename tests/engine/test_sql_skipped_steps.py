"""A SQL step reading a step that its `when:` skipped for a row sees NULL for it: the row is
neither lost nor merged empty (the by-hand cascade: a cheap model with a confidence, a strong one
on the unsure rows, `coalesce` in SQL). Mock provider, real DuckDB."""

from __future__ import annotations

import csv

import pyarrow.parquet as pq
import yaml

from batchor import api

SCHEMA = {
    "type": "object",
    "properties": {"sentiment": {"type": "string"}, "confidence": {"type": "number", "minimum": 0, "maximum": 1}},
    "required": ["sentiment", "confidence"],
}


def test_a_column_of_a_step_skipped_by_when_is_null_in_sql(workdir):
    with open(workdir / "data.csv", "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["id", "text"])
        out.writerows([f"r{i}", f"review {i}"] for i in range(17))
    spec = {
        "version": 1,
        "name": "cascade_by_hand",
        "input": {"path": "data.csv", "key": "id"},
        "model": {"provider": "openai", "name": "gpt-4.1-mini"},
        "steps": {
            "cheap": {"prompt": "Review: {{ row.text }}", "output": {"schema": SCHEMA}},
            "strong": {
                "model": {"name": "gpt-4.1"},
                "when": "cheap.confidence < 0.5",
                "prompt": "Review: {{ row.text }}",
                "output": {"schema": SCHEMA},
            },
            "merged": {"sql": "SELECT _row_key, coalesce(strong.sentiment, cheap.sentiment) AS sentiment FROM rows"},
        },
        "output": {"path": "out/out.parquet"},
    }
    (workdir / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    result = api.apply(workdir / "spec.yaml", mock=True, handle_signals=False)
    rows = pq.read_table(result.output_path).to_pylist()
    skipped = [r for r in rows if r["strong.sentiment"] is None]
    assert len(rows) == 17 and 0 < len(skipped) < 17  # the mock's confidences fall on both sides
    assert all(r["merged.sentiment"] == r["cheap.sentiment"] for r in skipped)
    assert all(r["merged.sentiment"] == r["strong.sentiment"] for r in rows if r["strong.sentiment"] is not None)
    assert {r["_status"] for r in rows} == {"succeeded"}
