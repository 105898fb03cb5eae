"""The keys a step still has to send, kept as one Arrow string array in plan order.

A dict or set of Python strings costs ~180 bytes per key (the str objects plus the hash table):
1.8 GB for a 10M-row step before a single request is sent. An Arrow array costs the key's bytes
plus a 4-byte offset. The engine's per-row lookups walk the plan in the array's order
(`StepWork.items`) or are vectorised (`mask`); keys handed to another executor are split off
with `only` / `without`, which keep the plan order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

_SLICE = 65_536  # keys turned into Python strings at a time while iterating


class PendingKeys:
    """An immutable ordered set of request keys: plan order, each key once."""

    def __init__(self, keys: pa.Array | pa.ChunkedArray | None = None) -> None:
        array = pa.chunked_array([], pa.string()) if keys is None else keys
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        self._keys: pa.Array = array

    @classmethod
    def first_seen(cls, keys: pa.Array | pa.ChunkedArray) -> PendingKeys:
        """Each distinct non-null key of `keys` once, in the order it first appears."""
        return cls(pc.unique(keys.drop_null()))  # Arrow's hash table keeps insertion order

    def __len__(self) -> int:
        return len(self._keys)

    def __bool__(self) -> bool:
        return len(self._keys) > 0

    def __iter__(self) -> Iterator[str]:
        for start in range(0, len(self._keys), _SLICE):
            yield from self._keys.slice(start, _SLICE).to_pylist()

    def __contains__(self, key: object) -> bool:
        """One key, by a scan in Arrow (no per-key Python objects): test many keys with `mask`."""
        if not isinstance(key, str):
            return False
        return pc.index(self._keys, pa.scalar(key, pa.string())).as_py() >= 0

    def mask(self, keys: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
        """Per key of `keys`: whether it is pending (a null key is not)."""
        return pc.fill_null(pc.is_in(keys, value_set=self._keys), False)

    def only(self, keys: Iterable[str]) -> PendingKeys:
        """The pending keys that are also in `keys`, in plan order."""
        return PendingKeys(self._keys.filter(_among(self._keys, keys)))

    def without(self, keys: Iterable[str]) -> PendingKeys:
        """The pending keys that are not in `keys`, in plan order."""
        return PendingKeys(self._keys.filter(pc.invert(_among(self._keys, keys))))


def _among(array: pa.Array, keys: Iterable[str]) -> pa.Array:
    return pc.fill_null(pc.is_in(array, value_set=pa.array(list(keys), pa.string())), False)
