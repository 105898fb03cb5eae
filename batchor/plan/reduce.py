"""Reduce steps: one request per group of rows, folded when a group is longer than the context.

A group is the rows (at the step's grain) with the same `group_by` values. Its prompt sees
`group.key` and `group.rows` (each row's input columns and the earlier answers it reads). A group
whose request does not fit the model's context window is cut into consecutive parts that do
(counted with the plan's token counter), each part is answered, and the partial answers are
combined by the fold prompt, `fan_in` at a time, level after level, until one answer remains.

`GroupWalk` is the one implementation of that tree: the planner walks it against the cache to
count the calls (exactly, once the rows are known: the fold's fan-in depends only on the step's
`max_tokens`, never on how long the partial answers turn out), and apply walks it to find the
requests still to send. Requests are keyed by their content, so a group gains a new key only
when its rows change: adding a row re-asks its group alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from batchor.errors import TemplateUndefinedError
from batchor.plan.model import StepPlan
from batchor.plan.request import RenderedRequest, StepRequests
from batchor.spec.templates import StepTemplates, compile_step
from batchor.state.base import StateStore
from batchor.state.cache import settled_failure_mask

ANSWER_SLACK = 16  # tokens around each partial answer in a fold prompt (separators, JSON quoting)
Lookup = Callable[[list[str]], dict[str, tuple[str, Any]]]


@dataclass
class Group:
    """Rows with the same `group_by` values, in plan order."""

    key: dict[str, Any]
    row_keys: list[str] = field(default_factory=list)
    items: list[dict[str, Any]] = field(default_factory=list)  # what `group.rows` holds per row
    projected: int = 0  # rows whose upstream answers do not exist yet (planning only)
    sizes: list[int] = field(default_factory=list)  # planning a projected group: each row's upper-bound tokens


def group_value(name: str, values: dict[str, Any], answers: dict[str, Any]) -> Any:
    """A `group_by` entry's value for one row: `column`, `row.column` or `step.field`."""
    head, _, rest = name.removeprefix("row.").partition(".")
    if head in answers:
        value = answers[head]
        for part in rest.split(".") if rest else ():
            value = value.get(part) if isinstance(value, dict) else None
        return value
    return values.get(name.removeprefix("row."))


def grouped(rows: Iterable[tuple[str, dict[str, Any], dict[str, Any]]], group_by: list[str]) -> dict[str, Group]:
    """Groups of (row key, input values, upstream answers), by their canonical key, first seen first."""
    groups: dict[str, Group] = {}
    for row_key, values, answers in rows:
        key = {name: group_value(name, values, answers) for name in group_by}
        group = groups.setdefault(json.dumps(key, sort_keys=True, default=str), Group(key))
        group.row_keys.append(row_key)
        group.items.append({**values, **answers})
    return groups


def reduce_templates(env: Any, step: StepPlan, known_steps: set[str]) -> tuple[StepTemplates, StepTemplates]:
    """The step's own templates and its fold templates (`group` is theirs to read)."""
    names = known_steps | {"group"}
    own = compile_step(env, step.name, step.system, step.prompt, None, names)
    assert step.reduce is not None
    fold_prompt = step.reduce.fold_prompt or step.prompt
    fold = compile_step(env, step.name, step.system, fold_prompt, None, names, prompt_key="reduce.fold_prompt")
    for compiled in (own, fold):
        compiled.step_refs.discard("group")
    return own, fold


@dataclass
class WalkResult:
    """Where one group stands: its final answer's key, or the requests to send now."""

    final: str | None = None  # request key of the group's answer, once it exists
    failed: str | None = None  # a request of the group that failed for good
    cached: int = 0  # requests of the tree already answered
    pending: list[tuple[RenderedRequest, int]] = field(default_factory=list)  # to send now, with tokens
    later: list[int] = field(default_factory=list)  # partial answers per fold request still to come


class GroupWalk:
    """Renders a group's fold tree level by level against what is already answered."""

    def __init__(self, step: StepPlan, own: StepTemplates, fold: StepTemplates) -> None:
        self.step = step
        self.requests, self.folds = StepRequests(step, own), StepRequests(step, fold)
        self.window = step.context_window

    @property
    def answer_tokens(self) -> int:
        """The most a partial answer adds to a fold request."""
        return self.step.max_tokens + ANSWER_SLACK

    def fold_tokens(self, group: Group, answers: int) -> int:
        """A fold request's tokens with `answers` partial answers, each at its longest."""
        return self._empty(self._fold, self.step.reduce.fold_prompt if self.step.reduce else None, group) + (
            answers * self.answer_tokens
        )

    def _empty(self, render: Callable[..., tuple[RenderedRequest, int]], prompt: str | None, group: Group) -> int:
        """Tokens of a request over no rows; a template that cannot render without rows (it reads
        `group.rows[0]`) counts its own text instead."""
        try:
            return render(group, [], 0)[1]
        except TemplateUndefinedError:
            return self.requests.counter.count((self.step.system or "") + (prompt or self.step.prompt))

    def fan_in(self, group: Group) -> int:
        """Partial answers per fold request: as many as fit when each is `max_tokens` long (so the
        tree's shape, and the plan's count of calls, never depends on the answers' lengths)."""
        if self.window is None:
            return 1 << 30
        room = self.window - self.step.max_tokens - self.fold_tokens(group, 0)
        return max(2, room // self.answer_tokens)

    def estimated_parts(self, group: Group) -> list[int]:
        """Tokens of each first-level request, packing rows of `group.sizes` (planning, rows not known)."""
        row_tokens = group.sizes
        base = self._empty(lambda g, _rows, _n: self._part(g, 0, 0), self.step.prompt, group)
        room = None if self.window is None else self.window - self.step.max_tokens
        parts: list[int] = []
        for n in row_tokens:
            if parts and (room is None or parts[-1] + n <= room):
                parts[-1] += n
            else:
                parts.append(base + n)
        return parts

    def fits(self, tokens: int) -> bool:
        return self.window is None or tokens + self.step.max_tokens <= self.window

    def parts(self, group: Group) -> list[tuple[RenderedRequest, int]]:
        """The first level: consecutive runs of rows, each as long as fits (at least one row)."""
        out, start = [], 0
        while start < len(group.items):
            size, first = self._most_that_fit(group, start)
            out.append(first)
            start += size
        return out

    def _most_that_fit(self, group: Group, start: int) -> tuple[int, tuple[RenderedRequest, int]]:
        """The most rows from `start` whose request fits (galloping, then halving): ~2 log n renders."""
        left = len(group.items) - start
        best = (1, self._part(group, start, 1))
        if left == 1 or not self.fits(best[1][1]):
            return best
        low, high = 1, 2
        while True:
            size = min(high, left)
            tried = self._part(group, start, size)
            if not self.fits(tried[1]):
                break
            best, low = (size, tried), size
            if size == left:
                return best
            high *= 2
        high = min(high, left)
        while high - low > 1:
            middle = (low + high) // 2
            tried = self._part(group, start, middle)
            if self.fits(tried[1]):
                best, low = (middle, tried), middle
            else:
                high = middle
        return best

    def _part(self, group: Group, start: int, size: int) -> tuple[RenderedRequest, int]:
        context = {"group": {"key": group.key, "rows": group.items[start : start + size], "partial": False}}
        return self._rendered(self.requests, context, group)

    def _fold(self, group: Group, answers: list[Any], level: int) -> tuple[RenderedRequest, int]:
        context = {"group": {"key": group.key, "rows": answers, "partial": True, "level": level}}
        return self._rendered(self.folds, context, group)

    def _rendered(self, requests: StepRequests, context: dict[str, Any], group: Group) -> tuple[RenderedRequest, int]:
        request = requests.render(json.dumps(group.key, default=str), context)
        assert request is not None  # a reduce step has no `when:`
        return request, int(requests.tokens([request])[0] or 0)

    def walk(self, group: Group, answered: Callable[[list[str]], dict[str, tuple[str, Any]]]) -> WalkResult:
        """Follow the tree as far as answers exist. `answered(keys)`: per key with a stored
        result, (status, parsed answer); status `failed` is a failure for good."""
        result = WalkResult()
        level = self.parts(group)
        depth, fan_in = 0, self.fan_in(group)
        while True:
            found = answered([r.key for r, _ in level])
            failed = next((r.key for r, _ in level if found.get(r.key, ("",))[0] == "failed"), None)
            if failed is not None:
                result.failed = failed
                return result
            missing = [(r, n) for r, n in level if r.key not in found]
            result.cached += len(level) - len(missing)
            if missing:
                result.pending = missing
                result.later = fold_shape(len(level), fan_in)
                return result
            if len(level) == 1:
                result.final = level[0][0].key
                return result
            answers = [found[r.key][1] for r, _ in level]
            depth += 1
            level = [self._fold(group, answers[i : i + fan_in], depth) for i in range(0, len(answers), fan_in)]


def fold_shape(parts: int, fan_in: int) -> list[int]:
    """Partial answers read by each fold request after `parts` answers, level by level."""
    sizes: list[int] = []
    while parts > 1:
        sizes += [min(fan_in, parts - i) for i in range(0, parts, fan_in)]
        parts = -(-parts // fan_in)
    return sizes


def parsed(step: StepPlan, output: Any) -> Any:
    """A stored answer as the fold prompt reads it (JSON parsed for structured steps)."""
    return json.loads(output) if step.json_answers and isinstance(output, str) else output


def stored_lookup(store: StateStore | None, step: StepPlan, fresh: bool = False, retry_failed: bool = False) -> Lookup:
    """`answered` for `GroupWalk.walk` from the state: succeeded answers, and failures that
    sending the same request again would repeat (unless `retry_failed`). `fresh`: none (--refresh)."""

    def answered(keys: list[str]) -> dict[str, tuple[str, Any]]:
        if store is None or fresh or not keys:
            return {}
        array = pa.array(keys, pa.string())
        table = store.results_for_keys(array)
        found = {
            k: ("succeeded", parsed(step, out))
            for k, status, out in zip(*(table.column(c).to_pylist() for c in ("request_key", "status", "output")))
            if status == "succeeded"
        }
        if not retry_failed:
            settled = settled_failure_mask(store, array).to_pylist()
            found.update({k: ("failed", None) for k, bad in zip(keys, settled) if bad and k not in found})
        return found

    return answered


@dataclass
class ReduceTally:
    """Plan counts of a reduce step: requests (calls) of every group's fold tree."""

    rows: int = 0
    skipped: int = 0
    cached: int = 0
    to_run: int = 0
    input_tokens: int = 0
    projected: int = 0  # rows whose upstream answers do not exist yet: their groups are estimated
    bounded: bool = False  # some requests are counted at an upper bound (a resolve step's, see resolve_walk.py)
    groups: int = 0
    too_long: int = 0
    failed_earlier: int = 0
    attachment_problems: int = 0
    attachment_examples: list[str] = field(default_factory=list)


def plan_reduce(walker: GroupWalk, groups: Iterable[Group], answered: Lookup, skipped: int) -> ReduceTally:
    """Count each group's calls: walked against the cache where its rows are known, else shaped
    from each row's upper-bound size (`Group.items` then holds token counts)."""
    tally = ReduceTally(skipped=skipped, rows=skipped)
    for group in groups:
        overhead, fan_in = walker.fold_tokens(group, 0), walker.fan_in(group)
        tally.groups += 1
        tally.rows += len(group.row_keys)
        if group.projected:
            tally.projected += group.projected
            parts = walker.estimated_parts(group)
            folds = fold_shape(len(parts), fan_in)
            tally.to_run += len(parts) + len(folds)
            tally.input_tokens += sum(parts) + sum(overhead + n * walker.answer_tokens for n in folds)
            continue
        walked = walker.walk(group, answered)
        tally.cached += walked.cached
        if walked.failed is not None:
            tally.failed_earlier += 1
            continue
        tally.to_run += len(walked.pending) + len(walked.later)
        tally.input_tokens += sum(n for _, n in walked.pending)
        tally.input_tokens += sum(overhead + n * walker.answer_tokens for n in walked.later)
        tally.too_long += sum(1 for _, n in walked.pending if not walker.fits(n))
    return tally
