"""Clusters of a `resolve:` job: the pairs its step judged the same, joined into connected
components, each with a canonical value; written per input row after the run.

A cluster's id is its smallest row key (stable across runs: adding a row never renames the
clusters it does not join). Pairs without a `same: true` answer (failed, pending, `false`) do not
merge. Canonical value: `most_frequent` (ties: the longest, then alphabetical) or `longest`
(ties: the most frequent, then alphabetical).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable

import pyarrow as pa


def components(keys: Iterable[str], same: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Each key's cluster id (the smallest key of its connected component)."""
    parent = {k: k for k in keys}

    def root(k: str) -> str:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for a, b in same:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {k: root(k) for k in parent}


def canonical_values(cluster_of: dict[str, str], value_of: dict[str, str | None], rule: str) -> dict[str, str | None]:
    """Each cluster's canonical value among its rows' values."""
    members: dict[str, list[str]] = {}
    for key, cluster in cluster_of.items():
        value = value_of.get(key)
        if value is not None:
            members.setdefault(cluster, []).append(value)
    chosen: dict[str, str | None] = {}
    for cluster, values in members.items():
        counts = Counter(values)
        if rule == "longest":
            chosen[cluster] = min(counts, key=lambda v: (-len(v), -counts[v], v))
        else:
            chosen[cluster] = min(counts, key=lambda v: (-counts[v], -len(v), v))
    return chosen


def is_same(answer: object) -> bool:
    """A judge's answer says the pair is the same entity (a JSON object with `same: true`)."""
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except ValueError:
            return False
    return isinstance(answer, dict) and answer.get("same") is True


def clustered(rows: pa.Table, key: str, value: str, same: list[tuple[str, str]], rule: str) -> pa.Table:
    """`rows` with `_cluster` and `_canonical` appended."""
    keys = [str(k) for k in rows.column(key).to_pylist()]
    values = rows.column(value).to_pylist()
    cluster_of = components(keys, same)
    canonical = canonical_values(cluster_of, dict(zip(keys, values)), rule)
    ids = [cluster_of[k] for k in keys]
    table = rows.append_column("_cluster", pa.array(ids, pa.string()))
    return table.append_column("_canonical", pa.array([canonical.get(c) for c in ids], pa.string()))
