"""Split steps end to end: chunks are element rows `<row>#<n>` that later steps run on, a reduce by
the source row combines their answers, and the plan counts the chunk requests exactly (real openai
SDK against the fake provider)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

import batchor
from tests.conftest import write_csv

NOTES = {
    "type": "object",
    "properties": {"point": {"type": "string"}},
    "required": ["point"],
    "additionalProperties": False,
}


def _doc(name: str, paragraphs: int) -> str:
    return "\n\n".join(
        f"{name} paragraph {i}: " + "the terms of the lease and its renewal " * 4 for i in range(paragraphs)
    )


def _spec(folder: Path, docs: dict[str, str]) -> str:
    write_csv(folder / "docs.csv", [{"doc": k, "body": v} for k, v in docs.items()])
    spec = {
        "name": "long_docs",
        "input": {"path": "docs.csv", "key": "doc"},
        "model": {"provider": "openai", "name": "gpt-4.1-mini", "params": {"max_tokens": 30}},
        "steps": {
            "chunks": {"split": "{{ row.body }}", "chunk_tokens": 80, "delimiter": "\n\n", "gather": {"before": 1}},
            "notes": {
                "prompt": "Part {{ chunks.n }}/{{ chunks.of }} after [{{ chunks.before | join }}]: {{ chunks.text }}",
                "output": {"schema": NOTES},
            },
            "summary": {
                "reduce": {"group_by": ["doc"]},
                "prompt": "Summary of {{ group.key.doc }}:{% for r in group.rows %} {{ r.notes.point }}{% endfor %}",
            },
        },
        "output": {"path": "out.parquet"},
        "limits": {"concurrency": 4},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(path)


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_chunks_run_as_elements_and_a_reduce_by_document_combines_them(fake, workdir):
    spec = _spec(workdir, {"d1": _doc("d1", 6), "d2": _doc("d2", 3)})
    plan = batchor.plan(spec)
    chunks = plan.steps["notes"]["to_run"]
    assert chunks == plan.steps["chunks"]["elements"] > 2  # cut at plan time: exact, not projected
    assert not plan.steps["notes"]["projected"]

    assert batchor.apply(spec).status == "succeeded"
    assert fake.stats()["requests"] == chunks + 2  # one note per chunk, one summary per document
    rows = pq.read_table(workdir / "out.parquet").to_pylist()
    assert len(rows) == chunks and rows[0]["_row_key"] == "d1#1"
    for row in rows:
        n = int(row["_row_key"].split("#")[1])
        assert row["chunks.n"] == n and row["_status"] == "succeeded"
        assert (row["chunks.before"] == "[]") == (n == 1)
    groups = pq.read_table(workdir / "out.summary.parquet").to_pylist()
    assert [(g["doc"], g["_rows"], g["_status"]) for g in groups] == [
        ("d1", sum(r["doc"] == "d1" for r in rows), "succeeded"),
        ("d2", sum(r["doc"] == "d2" for r in rows), "succeeded"),
    ]
    assert all(g["summary"] for g in groups)

    fake.reset()
    spec = _spec(workdir, {"d1": _doc("d1", 6), "d2": _doc("d2", 3) + "\n\nd2 an added last paragraph"})
    assert batchor.apply(spec).status == "succeeded"
    assert fake.stats()["requests"] == 2  # d2's last chunk changed: its note and d2's summary
