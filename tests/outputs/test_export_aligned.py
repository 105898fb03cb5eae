"""The export attaches each row's results by row key and streams rows in order, fetching results
part by part; it must write exactly what a LEFT JOIN of rows and results sorted by row position
writes, whatever the part size."""

from __future__ import annotations

import hashlib

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import SENTIMENT_SCHEMA, make_spec, write_csv

from batchor import api
from batchor.outputs import export
from batchor.state import open_state
from batchor.state.base import RESULT_SCHEMA

SPEC_STEPS = {
    "classify": {
        "prompt": "Review: {{ row.text }}",
        "output": {"schema": SENTIMENT_SCHEMA},
        "when": "row.id != 'skip'",
    },
    "summary": {"prompt": "Sum up {{ classify.sentiment }}: {{ row.text }}"},
}


def _reference(plan, store, path):
    """The export as a join of all rows and results, ordered by row position."""
    steps = plan.header.steps
    aliases = [f"res_{i}" for i in range(len(steps))]
    select = [f"rows.{export._q(c)}" for c in plan.header.input.columns]
    for step, alias in zip(steps, aliases):
        select.extend(export._answer_columns(step, alias))
    select += [
        "rows._row_key",
        f"{export._status_sql(aliases)} AS _status",
        f"{export._error_sql(steps, aliases)} AS _error",
    ]
    joins = " ".join(f"LEFT JOIN {a} ON {a}.row_key = rows._row_key" for a in aliases)
    rows = pa.concat_tables(
        pa.Table.from_batches([b]) for b in plan.iter_batches(["_row_key"] + list(plan.header.input.columns))
    )
    rows = rows.append_column("__idx", pa.array(range(rows.num_rows), pa.int64()))
    db = duckdb.connect()
    db.register("rows", rows)
    for alias, step in zip(aliases, steps):
        db.register(alias, store.job_results(plan.job_id, step.name))
    db.execute(f"COPY (SELECT {', '.join(select)} FROM rows {joins} ORDER BY rows.__idx) TO '{path}' (FORMAT parquet)")
    db.close()


@pytest.mark.parametrize("part_rows", [1, 7, export.PART_ROWS])
def test_export_matches_a_sorted_join(workdir, monkeypatch, part_rows):
    monkeypatch.setattr(export, "PART_ROWS", part_rows)
    monkeypatch.setattr(export, "MAX_PARTS", 10**9)
    spec = make_spec(workdir, steps=SPEC_STEPS)
    ids = ["ok", "failed", "pending", "unmapped", "skip"] + [f"r{i}" for i in range(40)]
    # rows r30.. repeat the texts (so the request keys) of ok, failed, pending and r0..: repeated
    # keys in other parts
    texts = {i: f"text of {ids[(n - 30) % 8] if n >= 30 else i}" for n, i in enumerate(ids)}
    write_csv(workdir / "data.csv", [{"id": i, "text": texts[i]} for i in ids])
    plan = api.plan(spec, save=False, mock=True)
    store = open_state(str(workdir / ".batchor" / "state.duckdb"))
    keys = dict(zip(*(c.to_pylist() for c in next(plan.iter_batches(["_row_key", "__req.classify.key"])).columns)))
    mapped = [i for i in ids if i != "unmapped"]
    store.add_run_requests(
        plan.job_id,
        "classify",
        pa.table({"row_key": mapped, "request_key": [keys[i] for i in mapped]}),
    )
    store.add_run_requests(
        plan.job_id,
        "summary",
        pa.table(
            {
                "row_key": mapped,  # not rendered yet
                "request_key": pa.nulls(len(mapped), pa.string()),
            }
        ),
    )
    pending = {keys["pending"], keys["skip"]}
    answered = [i for i in mapped if keys[i] not in pending]
    status = {i: "failed" if i == "failed" else "succeeded" for i in answered}
    answered = list({keys[i]: i for i in reversed(answered)}.values())  # each key once
    store.record_results(
        pa.table(
            {
                "request_key": [keys[i] for i in answered],
                "step": ["classify"] * len(answered),
                "status": [status[i] for i in answered],
                "output": [
                    None if status[i] == "failed" else '{"sentiment": "positive", "score": 4}' for i in answered
                ],
                "error_code": ["server_error" if status[i] == "failed" else None for i in answered],
                "error": ["boom" if status[i] == "failed" else None for i in answered],
                "attempts": [1] * len(answered),
                "input_tokens": [3] * len(answered),
                "output_tokens": [2] * len(answered),
                "cost_usd": [0.0] * len(answered),
                "run_id": ["r"] * len(answered),
            },
            schema=RESULT_SCHEMA,
        )
    )
    with store.kept_attached(60):  # as in an apply: one attach for the ~100 parts of part_rows=1, not one each
        for fmt in ("parquet", "csv", "jsonl"):
            export.write_output(plan, store, workdir / f"out.{fmt}", fmt)
    _reference(plan, store, workdir / "reference.parquet")
    got, want = pq.read_table(workdir / "out.parquet"), pq.read_table(workdir / "reference.parquet")
    assert got.equals(want)
    assert got.column("_row_key").to_pylist() == ids
    assert got.column("_status").to_pylist()[:5] == [
        "succeeded",
        "failed",
        "pending",
        "pending",
        "skipped",
    ]
    with duckdb.connect() as db:
        for fmt, reader in (("csv", "read_csv"), ("jsonl", "read_json")):
            assert [
                r[0] for r in db.execute(f"SELECT _row_key FROM {reader}('{workdir / f'out.{fmt}'}')").fetchall()
            ] == ids
    statuses = got.column("_status").to_pylist()
    counts = export.row_counts(plan, store)
    assert counts == {s: statuses.count(s) for s in export.ROW_STATUSES}
    assert counts["failed"] == 3 and counts["pending"] == 4  # the repeated keys count too
    monkeypatch.setattr(export, "PART_ROWS", 10**9)  # the whole job in one part
    for fmt in ("parquet", "csv", "jsonl"):
        export.write_output(plan, store, workdir / f"whole.{fmt}", fmt)
        assert _sha256(workdir / f"out.{fmt}") == _sha256(workdir / f"whole.{fmt}")
    assert export.row_counts(plan, store) == counts


@pytest.mark.parametrize("small", [True, False])
def test_an_apply_s_counts_are_those_of_the_file_it_wrote(workdir, monkeypatch, small):
    """What an apply ends with: the output and its rows by status. A small job reads its results
    from the state once for both, a big one (here: SMALL_ROWS below the job) twice."""
    spec = make_spec(workdir, steps=SPEC_STEPS)
    write_csv(workdir / "data.csv", [{"id": f"r{i}", "text": "same" if i % 3 else f"t{i}"} for i in range(12)])
    plan = api.plan(spec, save=False, mock=True)
    store = open_state(str(workdir / ".batchor" / "state.duckdb"))
    keys = next(plan.iter_batches(["_row_key", "__req.classify.key"])).to_pydict()
    store.add_run_requests(
        plan.job_id, "classify", pa.table({"row_key": keys["_row_key"], "request_key": keys["__req.classify.key"]})
    )
    done = sorted(set(keys["__req.classify.key"]))[:2]  # "same" (8 rows) and one other: the rest stay pending
    store.record_results(
        pa.table(
            {
                "request_key": done,
                "step": ["classify"] * 2,
                "status": ["failed", "succeeded"],
                "output": [None, '{"sentiment": "mixed", "score": 3}'],
                "error_code": ["server_error", None],
                "error": ["boom", None],
                "attempts": [1, 1],
                "input_tokens": [1, 1],
                "output_tokens": [1, 1],
                "cost_usd": [0.0, 0.0],
                "run_id": ["r", "r"],
            },
            schema=RESULT_SCHEMA,
        )
    )
    if not small:
        monkeypatch.setattr(export, "SMALL_ROWS", 5)
    reads = []
    real = store.job_results_for_steps
    monkeypatch.setattr(store, "job_results_for_steps", lambda *args: reads.append(tuple(args[1])) or real(*args))
    path, counts = export.write_output_and_count(plan, store, workdir / "out.parquet")
    assert reads == ([("classify", "summary")] if small else [("classify", "summary")] * 2)  # one read of both
    statuses = pq.read_table(path).column("_status").to_pylist()
    assert counts == {s: statuses.count(s) for s in export.ROW_STATUSES} == export.row_counts(plan, store)
    assert counts["failed"] >= 1 and counts["pending"] >= 1 and sum(counts.values()) == 12


def _sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()
