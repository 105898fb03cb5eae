"""Resolve steps: candidate pairs of rows judged by the model, clusters, one canonical value each.

A resolve step sits in a pipeline like a reduce step: it sees every row (at its grain) with the
earlier answers it reads, and its value is an input column or an earlier answer (`company.name`).
The blocking rule pairs the rows (resolve/pairs.py's rules over the rows and their value, or the
cosine similarity of an embed step's vectors); the step's prompt judges each pair (`pair.a`,
`pair.b`); pairs judged `same` join into connected components (plan/clusters.py); a cluster
with several distinct values gets its canonical value by rule or by one request of its own
(`cluster.variants`, `cluster.rows`). Each row's answer is `{cluster, canonical}`.

`ResolveWalk` is the one implementation of those stages: the planner walks it against the cache
to count the requests (pairs exactly once the values and vectors exist; canonical requests exactly
once the pairs are judged, else bounded), and apply walks it to find the requests still to send.
Every request is keyed by its content: a pair by its two rows, a canonical request by its cluster.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from batchor.duck import confined_db, duckdb
from batchor.errors import ResolveError
from batchor.plan.clusters import canonical_values, components, is_same
from batchor.plan.model import StepPlan
from batchor.plan.reduce import Lookup, group_value
from batchor.plan.request import RenderedRequest, StepRequests
from batchor.plan.step_kinds import canonical_plan, judge_plan

Pending = list[tuple[RenderedRequest, int]]


@dataclass
class Member:
    """One row of a resolve step: its key, what templates see of it, its value and vector."""

    key: str
    item: dict[str, Any]
    value: Any = None
    vector: list[float] | None = None


def members_of(step: StepPlan, rows: Sequence[tuple[str, dict[str, Any], dict[str, Any]]]) -> list[Member]:
    """(row key, input values, upstream answers) as members, each with its value (and vector)."""
    assert step.resolve is not None
    plan = step.resolve
    out = []
    for key, values, answers in rows:
        value = group_value(plan.value, values, answers)
        vector = answers.get(plan.similar[0]) if plan.similar else None
        item = {**values, **answers, "key": key, "value": value}
        out.append(Member(key, item, value, vector if isinstance(vector, list) else None))
    return out


@dataclass
class ResolveResult:
    """Where a resolve step stands: the requests to send now, or every row's cluster and value."""

    pairs: int = 0  # candidate pairs
    cached: int = 0  # requests already answered
    failed: int = 0  # pairs whose request failed for good (they merge nothing)
    pending: Pending = field(default_factory=list)
    stage: str = "done"  # pairs | canonical | done
    canonical_later: int = 0  # canonical requests at most, while pairs are still pending
    cluster_of: dict[str, str] = field(default_factory=dict)
    canonical: dict[str, Any] = field(default_factory=dict)


class ResolveWalk:
    """Renders a resolve step's pair and canonical requests against what is already answered."""

    def __init__(self, step: StepPlan, judge: Any, canonical: Any | None) -> None:
        assert step.resolve is not None
        self.step, self.plan = step, step.resolve
        self.judge = judge_plan(step)
        self.pairs_requests = StepRequests(self.judge, judge)
        self.canon = canonical_plan(step) if canonical is not None else None
        self.canonical_requests = StepRequests(self.canon, canonical) if self.canon and canonical else None

    def candidate_pairs(self, members: list[Member]) -> list[tuple[int, int]]:
        """Index pairs (i < j) the blocking rule joins; rows without a value pair with none.
        More than `max_pairs` stops the step before any pair is sent."""
        pairs = candidate_pairs(self.step.name, self.plan, members)
        if self.plan.max_pairs is not None and len(pairs) > self.plan.max_pairs:
            raise ResolveError(
                f"steps.{self.step.name}.resolve.block: the rule pairs {len(pairs):,} rows, "
                f"above max_pairs {self.plan.max_pairs:,}",
                hint="tighten the blocking rule, or raise `max_pairs` (answers stored so far are kept)",
            )
        return pairs

    def pair_requests(self, members: list[Member], pairs: list[tuple[int, int]]) -> Pending:
        rendered = []
        for i, j in pairs:
            a, b = members[i], members[j]
            request = self.pairs_requests.render(f"{a.key} ~ {b.key}", {"pair": {"a": a.item, "b": b.item}})
            assert request is not None  # a resolve step has no `when:`
            rendered.append(request)
        counts = self.pairs_requests.tokens(rendered)
        return [(r, int(n or 0)) for r, n in zip(rendered, counts)]

    def walk(self, members: list[Member], answered: Lookup) -> ResolveResult:
        """Follow the stages as far as answers exist (`answered`: see reduce.stored_lookup)."""
        pairs = self.candidate_pairs(members)
        requests = self.pair_requests(members, pairs)
        found = answered([r.key for r, _ in requests])
        result = ResolveResult(pairs=len(pairs))
        result.pending = [(r, n) for r, n in requests if r.key not in found]
        result.cached = len(requests) - len(result.pending)
        result.failed = sum(1 for r, _ in requests if found.get(r.key, ("",))[0] == "failed")
        keys = [m.key for m in members]
        if result.pending:
            result.stage = "pairs"
            maybe = [(members[i].key, members[j].key) for (i, j), (r, _) in zip(pairs, requests) if r.key not in found]
            merged = components(keys, self._same(members, pairs, requests, found) + maybe)
            result.canonical_later = len(self._several(members, merged)) if self.canon is not None else 0
            return result
        result.cluster_of = components(keys, self._same(members, pairs, requests, found))
        values = {m.key: m.value for m in members if m.value is not None}
        rule = "most_frequent" if self.plan.canonical == "prompt" else self.plan.canonical
        result.canonical = canonical_values(result.cluster_of, {k: str(v) for k, v in values.items()}, rule)
        if self.canon is not None:
            self._ask_canonical(members, result, answered)
        return result

    def _same(self, members: list[Member], pairs: Any, requests: Pending, found: dict[str, Any]) -> list[Any]:
        return [
            (members[i].key, members[j].key)
            for (i, j), (r, _) in zip(pairs, requests)
            if found.get(r.key, ("",))[0] == "succeeded" and is_same(found[r.key][1])
        ]

    def _several(self, members: list[Member], cluster_of: dict[str, str]) -> dict[str, list[Member]]:
        """Clusters with more than one distinct value: those a canonical prompt is asked about."""
        by_cluster: dict[str, list[Member]] = {}
        for member in members:
            by_cluster.setdefault(cluster_of[member.key], []).append(member)
        distinct = {c: {str(m.value) for m in ms if m.value is not None} for c, ms in by_cluster.items()}
        return {c: ms for c, ms in by_cluster.items() if len(distinct[c]) > 1}

    def _ask_canonical(self, members: list[Member], result: ResolveResult, answered: Lookup) -> None:
        """One request per cluster with several values; its answer replaces the rule's value."""
        assert self.canonical_requests is not None
        rendered = []
        for cluster, rows in self._several(members, result.cluster_of).items():
            counts = Counter(str(m.value) for m in rows if m.value is not None)
            values = sorted(counts, key=lambda v: (-counts[v], -len(v), v))
            context = {"cluster": {"id": cluster, "variants": values, "rows": [m.item for m in rows]}}
            request = self.canonical_requests.render(cluster, context)
            assert request is not None
            rendered.append((cluster, request))
        tokens = self.canonical_requests.tokens([r for _, r in rendered])
        found = answered([r.key for _, r in rendered])
        for (cluster, request), n in zip(rendered, tokens):
            status, answer = found.get(request.key, (None, None))
            if status is None:
                result.pending.append((request, int(n or 0)))
            elif status == "succeeded" and isinstance(answer, dict) and answer.get("canonical"):
                result.cached += 1
                result.canonical[cluster] = str(answer["canonical"])
            else:
                result.cached += status == "succeeded"  # an answer without a value keeps the rule's
        result.stage = "canonical" if result.pending else "done"

    def row_answers(self, result: ResolveResult) -> dict[str, dict[str, Any]]:
        """Each row's answer: its cluster id and the cluster's canonical value."""
        return {k: {"cluster": c, "canonical": result.canonical.get(c)} for k, c in result.cluster_of.items()}


def candidate_pairs(name: str, plan: Any, members: list[Member]) -> list[tuple[int, int]]:
    """The blocking rule over the members, in DuckDB (spec SQL: no file, no network)."""
    rows = [
        {**{k: v for k, v in m.item.items() if _scalar(v)}, "__i": i, "__v": m.vector}
        for i, m in enumerate(members)
        if m.value is not None and (plan.similar is None or m.vector)
    ]
    if len(rows) < 2:
        return []
    table = pa.Table.from_pylist(rows)
    db = confined_db()
    try:
        db.register("resolve_rows", table)
        found = db.sql(_pairs_query(plan)).fetchall()
    except duckdb.Error as exc:
        which = "key" if plan.block_key else "on" if plan.block_on else "similar"
        raise ResolveError(
            f"steps.{name}.resolve.block.{which}: {str(exc).splitlines()[0][:300]}",
            hint="write a DuckDB expression over the rows' columns and `value` (`on:` names the two rows a and b)",
        ) from None
    finally:
        db.unregister("resolve_rows")
        db.close()
    return sorted((int(i), int(j)) for i, j in found)


def _pairs_query(plan: Any) -> str:
    if plan.similar is not None:
        _, threshold, top_k = plan.similar
        near = (
            "SELECT a.__i AS i, b.__i AS j, list_cosine_similarity(a.__v, b.__v) AS s "
            f"FROM resolve_rows a JOIN resolve_rows b ON a.__i <> b.__i WHERE s >= {float(threshold)!r}"
        )
        top = f"SELECT i, j FROM ({near}) QUALIFY row_number() OVER (PARTITION BY i ORDER BY s DESC, j) <= {int(top_k)}"
        return f"SELECT DISTINCT least(i, j), greatest(i, j) FROM ({top})"
    if plan.block_key is not None:
        keyed = f"SELECT *, ({plan.block_key}) AS __block FROM resolve_rows"
        return f"WITH r AS ({keyed}) SELECT a.__i, b.__i FROM r a JOIN r b ON a.__i < b.__i AND a.__block = b.__block"
    return f"SELECT a.__i, b.__i FROM resolve_rows a JOIN resolve_rows b ON a.__i < b.__i AND ({plan.block_on})"


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))
