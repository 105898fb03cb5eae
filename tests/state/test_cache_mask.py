"""Which of a step's request keys have a stored answer (or a failure that would repeat): a big
key set is asked in parts, with the same answer, in the keys' order, as one query."""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pytest
from stored_results import stored_results

from batchor.state import DuckDBStore
from batchor.state.cache import _PART_KEYS, cached_mask, settled_failure_mask


def _key(i: int) -> str:
    return hashlib.md5(str(i).encode()).hexdigest()


@pytest.mark.parametrize("rows", [1_000, _PART_KEYS + 9_000])
def test_masks_match_the_stored_results_key_by_key(tmp_path, rows):
    keys = [None if i % 89 == 0 else _key(i % (rows - 500)) for i in range(rows)]  # nulls and repeats
    answered = {_key(i) for i in range(0, rows, 5)}
    failed = {_key(i) for i in range(1, rows, 7)} - answered
    store = DuckDBStore(tmp_path / "state.duckdb")
    store.record_results(
        stored_results([(k, "succeeded", None) for k in answered] + [(k, "failed", "invalid_request") for k in failed]),
        None,
    )
    chunked = pa.chunked_array([pa.array(keys[:700], pa.string()), pa.array(keys[700:], pa.string())])
    assert cached_mask(store, chunked).to_pylist() == [k in answered for k in keys]
    assert settled_failure_mask(store, chunked).to_pylist() == [k in failed for k in keys]
    assert cached_mask(store, pa.array([], pa.string())).to_pylist() == []
