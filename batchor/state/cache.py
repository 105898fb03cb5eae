"""The result cache seen column-wise: which of many request keys already have an answer.

Planning and apply ask this for every row of a job; stores that can answer with an Arrow array
(DuckDB) are asked once per step, others through `cached_keys` and its Python set.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from batchor.errors import ProviderError
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


def settled_failure_mask(store: StateStore, keys: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Per key: True when `store` holds a failure that sending the same request again would
    repeat (a deterministic error, see `ProviderError.deterministic`); False for null keys."""
    if len(keys) == 0:
        return pa.array([], pa.bool_())
    present = keys.drop_null() if keys.null_count else keys
    combined = present.combine_chunks() if isinstance(present, pa.ChunkedArray) else present
    found = store.failed_key_array(combined, deterministic_codes())
    return pc.is_in(keys, value_set=found, skip_nulls=True)


def deterministic_codes() -> tuple[str, ...]:
    """The error codes of every deterministic provider error in the error tree."""
    codes: set[str] = set()
    todo: list[type[ProviderError]] = [ProviderError]
    while todo:
        kind = todo.pop()
        todo.extend(kind.__subclasses__())
        if kind.deterministic:
            codes.add(kind.code)
    return tuple(sorted(codes))
