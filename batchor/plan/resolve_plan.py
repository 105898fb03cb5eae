"""Plan counts of resolve steps: pairs and canonical requests walked against the cache.

The planner collects a resolve step's rows with what they read (plan/dependent.py). When every
row's value (and vector) is known, the pairs are counted exactly, by the same `ResolveWalk` apply
uses; the canonical requests too once every pair is answered, else at most one per cluster the
unanswered pairs could still make. When some rows' values do not exist yet (the value is an
answer of an earlier step still to run), the pairs are bounded: every two rows, or `top_k` per
row for similarity blocking, at most `block.max_pairs`, and the count is marked as an estimate.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from batchor.plan.dependent import FAILED, SKIPPED
from batchor.plan.model import StepPlan
from batchor.plan.reduce import ReduceTally, stored_lookup
from batchor.plan.resolve_walk import ResolveWalk, members_of
from batchor.plan.step_kinds import canonical_plan, judge_plan
from batchor.spec.templates import compile_step, make_environment, templates_folder
from batchor.state.base import StateStore


def resolve_walker(step: StepPlan, base_dir: str, templates: str | None) -> ResolveWalk:
    """The walker of a resolve step from its pinned templates."""
    assert step.resolve is not None
    env = make_environment(templates_folder(Path(base_dir), templates))
    known = set(step.depends_on)
    judge = compile_step(env, step.name, step.system, step.prompt, None, known | {"pair"})
    canonical = None
    if step.resolve.canonical_prompt is not None:
        other = canonical_plan(step)
        canonical = compile_step(env, step.name, other.system, other.prompt, None, known | {"cluster"})
    return ResolveWalk(step, judge, canonical)


def resolve_tallies(
    steps: list[StepPlan],
    collected: dict[str, list[Any]],
    state: StateStore | None,
    cache: tuple[frozenset[str], bool],
    folders: tuple[str, str | None],
) -> dict[str, ReduceTally]:
    """Counts of each resolve step from its collected (row, input values, upstream answers)."""
    refresh, retry_failed = cache
    out: dict[str, ReduceTally] = {}
    for step in (s for s in steps if s.kind == "resolve"):
        walker = resolve_walker(step, *folders)
        fresh = step.name in refresh or "*" in refresh
        rows = collected.get(step.name, [])
        out[step.name] = plan_resolve(walker, rows, stored_lookup(state, judge_plan(step), fresh, retry_failed))
    return out


def plan_resolve(walker: ResolveWalk, rows: list[Any], answered: Any) -> ReduceTally:
    """Count the step's requests: walked where every row is known, else bounded."""
    tally = ReduceTally()
    known, projected = [], 0
    for row, values, answers in rows:
        states = list(answers.values())
        tally.rows += row.weight
        if any(a is SKIPPED or a is FAILED for a in states):
            tally.skipped += row.weight
        elif any(a is None for a in states):
            projected += row.weight
            known.append((row.key, values, {k: v for k, v in answers.items() if v is not None}))
        else:
            known.append((row.key, values, answers))
    if projected:
        return _bounded(walker, known, projected, tally)
    walked = walker.walk(members_of(walker.step, known), answered)
    tally.groups = walked.pairs
    tally.cached, tally.failed_earlier = walked.cached, walked.failed
    tally.to_run = len(walked.pending) + walked.canonical_later
    tally.input_tokens = sum(n for _, n in walked.pending) + walked.canonical_later * _canonical_tokens(walker, known)
    tally.bounded = walked.canonical_later > 0
    return tally


def _bounded(walker: ResolveWalk, known: list[Any], projected: int, tally: ReduceTally) -> ReduceTally:
    """Rows whose value is not known yet: every two rows may pair (`top_k` each when blocking by
    similarity), and every cluster of two or more may need a canonical request."""
    assert walker.step.resolve is not None
    n = len(known)
    pairs = n * (n - 1) // 2
    if walker.step.resolve.similar is not None:
        pairs = min(pairs, n * walker.step.resolve.similar[2])
    if walker.step.resolve.max_pairs is not None:
        pairs = min(pairs, walker.step.resolve.max_pairs)
    per_row = max((_row_tokens(walker, item) for item in known), default=0)
    prompt = walker.pairs_requests.counter.count((walker.step.system or "") + walker.step.prompt)
    canonical = n // 2 if walker.canon is not None else 0
    tally.projected, tally.bounded, tally.groups = projected, True, pairs
    tally.to_run = pairs + canonical
    tally.input_tokens = pairs * (prompt + 2 * per_row) + canonical * _canonical_tokens(walker, known)
    return tally


def _row_tokens(walker: ResolveWalk, row: Any) -> int:
    """A row's most tokens in a pair prompt: its known values, and each unknown answer at its longest."""
    _, values, answers = row
    unknown = sum(walker.step.max_tokens for d in walker.step.depends_on if d not in answers)
    return walker.pairs_requests.counter.count(json.dumps({**values, **answers}, default=str)) + unknown


def _canonical_tokens(walker: ResolveWalk, known: list[Any]) -> int:
    """A canonical request's tokens at most: its prompt and a few rows (an estimate)."""
    if walker.canon is None:
        return 0
    counter = walker.pairs_requests.counter
    prompt = counter.count((walker.canon.system or "") + walker.canon.prompt)
    return prompt + 4 * max((_row_tokens(walker, item) for item in known), default=0)
