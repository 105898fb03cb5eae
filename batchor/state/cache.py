"""The result cache seen column-wise: which of many request keys already have an answer.

Planning and apply ask this for every row of a job; stores that can answer with an Arrow array
(DuckDB) are asked once per step, others through `cached_keys` and its Python set.
"""

from __future__ import annotations

from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from batchor.errors import ProviderError
from batchor.state.base import StateStore

_PART_KEYS = 1 << 17  # keys per store query: a bigger set is asked in parts, by first character
SMALL_KEYS = _PART_KEYS  # at most this many keys of many steps are asked at once (`known_keys`)


def cached_mask(store: StateStore, keys: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Per key: True when `store` holds a succeeded answer for it (False for null keys)."""
    return _mask_in_parts(keys, lambda present: _cached(store, present))


def _cached(store: StateStore, keys: pa.Array | pa.ChunkedArray) -> pa.Array:
    combined = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    as_array = getattr(store, "cached_key_array", None)
    if as_array is not None:
        return as_array(combined)
    return pa.array(sorted(store.cached_keys(combined)), pa.string())


def settled_failure_mask(
    store: StateStore, keys: pa.Array | pa.ChunkedArray, also: tuple[str, ...] = ()
) -> pa.Array | pa.ChunkedArray:
    """Per key: True when `store` holds a failure that sending the same request again would
    repeat (a deterministic error, see `ProviderError.deterministic`), or one with an error code
    of `also`; False for null keys."""
    codes = tuple(sorted({*deterministic_codes(), *also}))

    def failed(present: pa.Array | pa.ChunkedArray) -> pa.Array:
        combined = present.combine_chunks() if isinstance(present, pa.ChunkedArray) else present
        return store.failed_key_array(combined, codes)

    return _mask_in_parts(keys, failed)


def known_keys(store: StateStore, keys: pa.Array, *, failures: bool = True) -> tuple[pa.Array, pa.Array | None]:
    """Among `keys` (no nulls, a small set: many small steps' at once), those with a succeeded
    answer, and (with `failures`) those with a failure `settled_failure_mask` counts: one store
    query each instead of two per step."""
    failed = store.failed_key_array(keys, deterministic_codes()) if failures else None
    return _cached(store, keys), failed


def _mask_in_parts(
    keys: pa.Array | pa.ChunkedArray, found: Callable[[pa.Array | pa.ChunkedArray], pa.Array]
) -> pa.Array | pa.ChunkedArray:
    """Per key: whether it is among `found(keys without nulls)`. Request keys are hashes, so a
    big set is asked in parts by first character: each store query (a DuckDB join holds its
    keys) and each lookup set holds a sixteenth of them, and the mask keeps the keys' order."""
    if len(keys) == 0:
        return pa.array([], pa.bool_())
    if len(keys) <= _PART_KEYS:
        present = keys.drop_null() if keys.null_count else keys
        return pc.is_in(keys, value_set=found(present), skip_nulls=True)
    first = pc.utf8_slice_codeunits(keys, 0, 1)
    positions = [_one_array(pc.indices_nonzero(pc.is_null(keys)))]
    hits = [pa.repeat(False, len(positions[0]))]
    for prefix in pc.unique(first).drop_null().to_pylist():
        where = pc.indices_nonzero(pc.fill_null(pc.equal(first, prefix), False))
        part = keys.take(where)
        positions.append(_one_array(where))
        hits.append(_one_array(pc.is_in(part, value_set=found(part), skip_nulls=True)))
    in_key_order = pc.sort_indices(pa.concat_arrays(positions))
    return pa.concat_arrays(hits).take(in_key_order)


def _one_array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


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
