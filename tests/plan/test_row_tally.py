"""A root step's counts (cached, failed for good earlier, unique requests to run, their tokens,
too long) are the same whether the step is counted whole or, when big, in parts by key prefix."""

from __future__ import annotations

import hashlib

import pyarrow as pa
from stored_results import stored_results

from batchor.plan.model import StepPlan
from batchor.plan.render import _BATCH_ROWS, RowTally
from batchor.state import DuckDBStore

ROWS = _BATCH_ROWS + 17_000  # over one batch: counted in parts


def _key(i: int) -> str:
    return hashlib.sha256(str(i).encode()).hexdigest()


def _step() -> StepPlan:
    return StepPlan(
        name="s",
        provider="openai",
        model="gpt-4.1-mini",
        params={},
        prompt="p",
        max_tokens=50,
        context_window=650,
        expected_output_tokens=10,
        key_prefix="x",
    )


def test_a_big_step_is_counted_exactly_as_row_by_row(tmp_path):
    distinct = ROWS - 9_000  # rows i and i + distinct send the same request
    keys = [None if i % 97 == 0 else _key(i % distinct) for i in range(ROWS)]
    tokens = [(i * 37) % 700 for i in range(ROWS)]
    cached = {_key(i) for i in range(0, distinct, 7)}
    settled = {_key(i) for i in range(3, distinct, 11)} - cached
    retried = {_key(i) for i in range(5, distinct, 13)} - cached - settled  # a failure worth sending again
    store = DuckDBStore(tmp_path / "state.duckdb")
    store.record_results(
        stored_results(
            [(k, "succeeded", None) for k in cached]
            + [(k, "failed", "invalid_request") for k in settled]
            + [(k, "failed", "rate_limited") for k in retried]
        ),
        None,
    )
    tally = RowTally()
    for start in range(0, ROWS, 10_000):
        tally.add(
            pa.array(keys[start : start + 10_000], pa.string()), pa.array(tokens[start : start + 10_000], pa.int32())
        )
    tally.finish(_step(), store)

    most: dict[str, int] = {}
    for key, count in zip(keys, tokens):
        if key is not None and key not in cached and key not in settled:
            most[key] = max(most.get(key, 0), count)
    fits = {k: t for k, t in most.items() if t <= 650 - 50}
    present = [k for k in keys if k is not None]
    assert (tally.rows, tally.skipped) == (ROWS, ROWS - len(present))
    assert tally.cached == sum(k in cached for k in present)
    assert tally.failed_earlier == sum(k in settled for k in present)
    assert (tally.to_run, tally.too_long, tally.input_tokens) == (len(fits), len(most) - len(fits), sum(fits.values()))
