"""The result cache seen column-wise: which of many request keys already have an answer.

Planning and apply ask this for every row of a job; stores that can answer with an Arrow array
(DuckDB) are asked once per step, others through `cached_keys` and its Python set.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from batchor.state.base import StateStore


def cached_mask(store: StateStore, keys: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Per key: True when `store` holds a succeeded answer for it (False for null keys)."""
    if len(keys) == 0:
        return pa.array([], pa.bool_())
    present = keys.drop_null() if keys.null_count else keys
    return pc.is_in(keys, value_set=_cached(store, present), skip_nulls=True)


def _cached(store: StateStore, keys: pa.Array | pa.ChunkedArray) -> pa.Array:
    combined = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    as_array = getattr(store, "cached_key_array", None)
    if as_array is not None:
        return as_array(combined)
    return pa.array(sorted(store.cached_keys(combined)), pa.string())
