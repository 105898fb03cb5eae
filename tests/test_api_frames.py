"""The Python API over DataFrames: pandas, polars and Arrow round trips, Excel input, sampling."""

from __future__ import annotations

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import batchor

SCHEMA = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "enum": ["x", "y"]},
        "score": {"type": "integer", "minimum": 0, "maximum": 9},
    },
    "required": ["label", "score"],
    "additionalProperties": False,
}


def _spec(**input_changes) -> dict:
    return {
        "name": "frames",
        "input": {"path": "unused.csv", **input_changes},
        "model": {"provider": "mock", "name": "m"},
        "steps": {"tag": {"prompt": "Tag {{ row.text }} ({{ row.n }})", "output": {"schema": SCHEMA}}},
        "output": {"path": "out.parquet"},
    }


def _frame() -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "text": ["a", "b", "c", "d"],
            "n": pd.array([1, 2, None, 4], dtype="Int64"),
            "when": pd.to_datetime(["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"]),
        },
        index=pd.Index([101, 205, 307, 409], name="ticket"),
    )
    return frame


def test_pandas_round_trip_keeps_index_dtypes_and_does_not_modify_input(workdir):
    frame = _frame()
    before = frame.copy()
    result = batchor.apply(_spec(), frame)
    pd.testing.assert_frame_equal(frame, before)  # the caller's frame is untouched
    data = result.data
    assert isinstance(data, pd.DataFrame)
    assert list(data.index) == [101, 205, 307, 409] and data.index.name == "ticket"
    assert data["n"].dtype == frame["n"].dtype and data["when"].dtype == frame["when"].dtype
    assert list(data.columns[:3]) == ["text", "n", "when"]
    assert {"tag.label", "tag.score", "_row_key", "_status", "_error"} <= set(data.columns)
    assert set(data["tag.label"]) <= {"x", "y"} and (data["_status"] == "succeeded").all()
    assert result.counts == {"succeeded": 4, "failed": 0, "cached": 0, "skipped": 0}
    errors = result.errors()  # pandas in, pandas out (it was an Arrow table)
    assert isinstance(errors, pd.DataFrame) and len(errors) == 0
    assert list(errors.columns) == ["_row_key", "_status", "_error"]


def test_polars_and_arrow_inputs_come_back_as_the_same_type(workdir):
    frame = pl.from_pandas(_frame().reset_index())
    result = batchor.apply(_spec(), frame)
    assert isinstance(result.data, pl.DataFrame) and result.data.height == 4
    assert result.data["ticket"].to_list() == [101, 205, 307, 409]
    table = pa.table({"text": ["p", "q"], "n": [5, 6]})
    arrow_result = batchor.apply(_spec(), table)
    assert isinstance(arrow_result.data, pa.Table)
    assert arrow_result.data.column("n").to_pylist() == [5, 6]
    assert isinstance(arrow_result.to_pandas(), pd.DataFrame) and isinstance(arrow_result.to_polars(), pl.DataFrame)
    assert isinstance(result.errors(), pl.DataFrame) and isinstance(arrow_result.errors(), pa.Table)


def test_second_apply_of_same_frame_is_all_cached(workdir):
    frame = _frame()
    batchor.apply(_spec(), frame)
    again = batchor.apply(_spec(), frame)
    assert again.cached == 4 and again.succeeded == 0 and again.cost_usd == 0


def test_plan_object_exposes_counts_cost_and_renders(workdir, tmp_path):
    plan = batchor.plan(_spec(), _frame())
    assert plan.rows == 4 and plan.steps["tag"]["to_run"] == 4
    assert set(plan.cost) == {"expected", "upper"}
    assert "4 to run" in str(plan) and "| tag |" in plan._repr_markdown_() and "<pre>" in plan._repr_html_()
    path = plan.save(tmp_path / "p.plan")
    loaded = batchor.Plan.load(path)
    assert loaded.plan_id == plan.plan_id
    result = batchor.apply(loaded)
    assert result.succeeded == 4


def test_excel_input(workdir):
    pytest.importorskip("openpyxl")
    _frame().reset_index().drop(columns=["when"]).to_excel(workdir / "rows.xlsx", index=False)
    result = batchor.apply({**_spec(), "input": {"path": "rows.xlsx", "key": "ticket"}})
    data = result.to_pandas()
    assert data["_row_key"].tolist() == ["101", "205", "307", "409"]
    assert (data["_status"] == "succeeded").all()


def test_limit_and_seeded_sample(workdir):
    rows = pd.DataFrame({"text": [f"t{i}" for i in range(50)], "n": range(50)})
    limited = batchor.plan(_spec(), rows, limit=7)
    assert limited.rows == 7
    first = batchor.plan(_spec(), rows, sample=10)
    second = batchor.plan(_spec(), rows, sample=10)
    keys = [b.column("_row_key").to_pylist() for b in first.iter_batches(["_row_key"])]
    keys2 = [b.column("_row_key").to_pylist() for b in second.iter_batches(["_row_key"])]
    assert first.rows == 10 and keys == keys2  # seeded: the same rows every time
    other = batchor.plan(_spec(seed=5), rows, sample=10)
    keys3 = [b.column("_row_key").to_pylist() for b in other.iter_batches(["_row_key"])]
    assert keys3 != keys


def test_seeds_draw_unrelated_samples(workdir):
    """Seed s+1's sample was seed s's moved by one row (a hash of row number + seed): on sorted
    input, neighbouring seeds drew neighbouring rows; DuckDB's two-argument hash(row, seed) drew
    the same rows for seeds 6 and 7. Repeated pilots or samples must be independent draws."""
    rows = pd.DataFrame({"text": [f"t{i}" for i in range(400)], "n": range(400)})

    def drawn(seed: int) -> set[int]:
        plan = batchor.plan(_spec(seed=seed, key="n"), rows, sample=40)
        return {int(k) for b in plan.iter_batches(["_row_key"]) for k in b.column("_row_key").to_pylist()}

    samples = [drawn(seed) for seed in range(12)]
    assert all(len(sample) == 40 for sample in samples)
    for seed in range(11):
        near = {k + 1 for k in samples[seed]} | {k - 1 for k in samples[seed]}
        assert len(samples[seed + 1] & near) < 20, seed  # ~8 by chance; 40 when shifted
        for other in range(seed + 1, 12):
            assert len(samples[seed] & samples[other]) < 15, (seed, other)  # ~4 by chance


def test_public_names():
    for name in batchor.__all__:
        assert hasattr(batchor, name), name
    assert issubclass(batchor.CostLimitError, batchor.BatchorError)
    assert batchor.CostLimitError.code == "cost_limit"


def test_cost_limit_error_carries_the_plan(workdir, fake):
    spec = {**_spec(), "model": {"provider": "openai", "name": "gpt-4.1-mini", "params": {"max_tokens": 500}}}
    with pytest.raises(batchor.CostLimitError) as info:
        batchor.apply(spec, _frame(), max_cost=0.0000001)
    assert info.value.plan is not None and info.value.plan.rows == 4
    assert fake.stats()["requests"] == 0


@pytest.mark.parametrize(
    "empty",
    [
        pd.DataFrame({"text": [], "n": []}),
        pl.DataFrame({"text": [], "n": []}),
        pa.table({"text": pa.array([], pa.string())}),
    ],
)
def test_an_empty_frame_is_refused_like_an_empty_input_file(workdir, empty):
    with pytest.raises(batchor.InputError) as raised:
        batchor.plan(_spec(), empty)
    assert raised.value.code == "input_empty"
    assert "no rows" in raised.value.message and "at least one row" in (raised.value.hint or "")
