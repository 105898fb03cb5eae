"""Work lists: which requests of a step still need an answer.

Steps that only use the row were rendered by the planner; their requests are read from the plan
data. Steps that use earlier steps' answers are rendered here, once those answers are stored.
Either way the row -> request mapping is recorded in state (for output and status) and cached
keys are filtered out with one cache query per step.
"""

from __future__ import annotations

import json
from typing import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from batchor.engine.fallback import moving_codes
from batchor.engine.pending import PendingKeys
from batchor.engine.rows import JobRows, input_values
from batchor.engine.types import WorkItem
from batchor.plan.model import StepPlan, req_column
from batchor.plan.plan_file import CompiledPlan
from batchor.plan.request import RenderedRequest, pinned_requests
from batchor.spec.inputs import ROW_KEY
from batchor.state.base import StateStore
from batchor.state.cache import cached_mask, settled_failure_mask


class StepWork:
    """Pending requests of one step of one job."""

    def __init__(
        self,
        plan: CompiledPlan,
        step: StepPlan,
        store: StateStore,
        *,
        refresh: bool = False,
        retry_failed: bool = False,
    ) -> None:
        self.plan, self.step, self.store, self.refresh = plan, step, store, refresh
        self.retry_failed = retry_failed  # False: requests that failed for good earlier stay failed
        self.pending = PendingKeys()  # keys to send, in plan order
        self.blocked = 0  # rows whose upstream step failed
        self.cached = 0
        self.failed_earlier = 0  # rows whose request failed for good earlier: not sent again
        self.skipped = 0
        self.rows = 0
        self.rows_of = JobRows(plan, store)  # rows at the step's grain, with upstream answers

    @property
    def lease_name(self) -> str:
        """What a shared run lists its keys under (state/leases.py): the step's name."""
        return self.step.name

    @property
    def widens(self) -> bool:
        """Its keys may be missing from a shared run's work items listed by another worker
        (--refresh and --retry-failed ask more; a reduce round lists the next level of folds)."""
        return self.refresh or self.retry_failed

    def scan(self) -> None:
        """Pass 1: map rows to requests, record the mapping, find the keys without an answer."""
        scan_wave([self])

    def _keys(self, maps: list[pa.Table] | None) -> pa.ChunkedArray:
        """Every row's request key (nulls left out), counting rows and skips; with `maps`, also
        the row -> request map to record (a table per batch of rows)."""
        present: list[pa.Array] = []
        step = pa.scalar(self.step.name, pa.string())
        for row_keys, keys, _, _ in self._requests(with_messages=False):
            self.rows += len(keys)
            if maps is not None:
                steps = pa.repeat(step, len(keys))
                maps.append(pa.table({"step": steps, "row_key": row_keys, "request_key": keys}))
            self.skipped += keys.null_count
            present.append(keys.drop_null() if keys.null_count else keys)
        return pa.chunked_array(present, pa.string())

    def _settle(self, keys: pa.ChunkedArray, cached: pa.ChunkedArray, settled: pa.ChunkedArray) -> None:
        """Pending: the keys neither cached nor failed for good (as this work's flags say)."""
        if not self.refresh:
            self.cached += pc.sum(cached).as_py() or 0
            keep = pc.invert(cached)
            keys, settled = keys.filter(keep), settled.filter(keep)
        if not self.refresh and not self.retry_failed:
            self.failed_earlier += pc.sum(settled).as_py() or 0
            keys = keys.filter(pc.invert(settled))
        self.pending = PendingKeys.first_seen(keys)

    def _moved_on(self) -> tuple[str, ...]:
        """Failures a batch step's fallback models take over (engine/other_models.py): such a row
        goes to its next model, not to its own again."""
        if self.step.mode != "batch" or not self.step.fallbacks:
            return ()
        return moving_codes(self.step.fallback_on)

    def items(self, wanted: Callable[[str], bool] | None = None) -> Iterator[WorkItem]:
        """Pass 2: the messages of pending requests, each key once, in plan order.

        The plan is read in the order `pending` was built in, so each row's key is compared with
        the next key expected only (no set of every key); a key not met there (a dependent step
        rendered differently the second time) is looked for once more. With `wanted`, only the
        keys it accepts (asked when the plan reaches them) are parsed and yielded: a worker of a
        shared run answers its claims only, and parsing every row cost each worker the whole step."""
        if not self.pending:
            return
        expected = iter(self.pending)
        want = next(expected, None)
        for _, keys, bodies, tokens in self._requests(with_messages=True):
            for key, body, n in zip(keys.to_pylist(), bodies, tokens):
                if key is not None and key == want:
                    if wanted is None or wanted(key):
                        yield self._item(key, body, n)
                    want = next(expected, None)
                    if want is None:
                        return
        yield from self._missed({key for key in (want, *expected) if key is not None}, wanted)

    def _missed(self, remaining: set[str], wanted: Callable[[str], bool] | None) -> Iterator[WorkItem]:
        for _, keys, bodies, tokens in self._requests(with_messages=True):
            for key, body, n in zip(keys.to_pylist(), bodies, tokens):
                if key in remaining:
                    remaining.discard(key)
                    if wanted is None or wanted(key):
                        yield self._item(key, body, n)
            if not remaining:
                return

    def _item(self, key: str, body: str, tokens: int | None) -> WorkItem:
        return WorkItem(key, self.step.name, tuple(json.loads(body)), int(tokens or 0))

    def _requests(self, *, with_messages: bool) -> Iterator[tuple[pa.Array, pa.Array, list, list]]:
        if not self.step.depends_on:
            yield from self._planned(with_messages)
        else:
            yield from self._rendered()

    def _planned(self, with_messages: bool) -> Iterator[tuple[pa.Array, pa.Array, list, list]]:
        name = self.step.name
        cols = [ROW_KEY, req_column(name, "key")]
        if with_messages:
            cols += [req_column(name, "messages"), req_column(name, "tokens")]
        for batch in self.plan.iter_batches(cols):
            bodies = batch.column(2).to_pylist() if with_messages else []
            tokens = batch.column(3).to_pylist() if with_messages else []
            yield batch.column(0), batch.column(1), bodies, tokens

    def _rendered(self) -> Iterator[tuple[pa.Array, pa.Array, list, list]]:
        """Render a dependent step for rows whose upstream answers all succeeded."""
        requests = pinned_requests(self.step, self.plan.header.base_dir, self.plan.header.spec.get("templates"))
        for inputs, rows in self.rows_of.batches(self.step.grain):
            values = input_values(inputs)
            rendered: list[RenderedRequest | None] = []
            for row in rows:
                answers = self.rows_of.upstream(self.step, row)
                if any(a is None for a in answers.values()):
                    self.blocked += 1
                    rendered.append(None)
                    continue
                rendered.append(requests.render(row.key, {"row": values[row.index], **answers}))
            keys = pa.array([r.key if r is not None else None for r in rendered], pa.string())
            bodies = [r.body if r is not None else None for r in rendered]
            yield pa.array([r.key for r in rows], pa.string()), keys, bodies, requests.tokens(rendered)


def scan_wave(works: list[StepWork]) -> None:
    """Pass 1 of a wave's steps together: a fixed number of state queries for any number of
    steps (which maps are recorded, one write of the new maps, one cache and one failure query),
    where each step once asked its own (a spec of 2,000 steps paid ~10,000 queries a wave)."""
    if not works:
        return
    store, job_id = works[0].store, works[0].plan.job_id
    planned = [w.step.name for w in works if not w.step.depends_on]
    recorded = store.steps_with_requests(job_id, planned) if planned else set()
    # A dependent step's map is recorded again in full: element rows of a list that shrank must go.
    forget = [w.step.name for w in works if w.step.depends_on]
    maps: list[pa.Table] = []
    keys = [w._keys(maps if w.step.depends_on or w.step.name not in recorded else None) for w in works]
    if maps or forget:
        table = pa.concat_tables(maps) if maps else pa.table({c: pa.array([], pa.string()) for c in _MAP})
        store.record_step_requests(job_id, table.select(list(_MAP)), forget)
    every = pa.chunked_array([c for k in keys for c in k.chunks], pa.string())
    asked = [w for w in works if not w.refresh]
    cached = cached_mask(store, every) if asked else pa.repeat(False, len(every))
    settled = _settled(works, keys)
    at = 0
    for i, (work, mine) in enumerate(zip(works, keys)):
        n = len(mine)
        unsettled = _chunked(pa.repeat(False, n))
        work._settle(mine, _chunked(cached.slice(at, n)), settled.get(i, unsettled))
        at += n


def _settled(works: list[StepWork], keys: list[pa.ChunkedArray]) -> dict[int, pa.ChunkedArray]:
    """Per work that skips failures for good: its keys' failure mask, one query per set of codes
    (a batch step whose fallbacks take some failures over has its own; most waves have one)."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, work in enumerate(works):
        if not work.refresh and not work.retry_failed:
            groups.setdefault(work._moved_on(), []).append(i)
    found: dict[int, pa.ChunkedArray] = {}
    for also, members in groups.items():
        part = pa.chunked_array([c for i in members for c in keys[i].chunks], pa.string())
        mask = settled_failure_mask(works[0].store, part, also)
        at = 0
        for i in members:
            found[i] = _chunked(mask.slice(at, len(keys[i])))
            at += len(keys[i])
    return found


_MAP = ("step", "row_key", "request_key")


def _chunked(values: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
    return values if isinstance(values, pa.ChunkedArray) else pa.chunked_array([values], values.type)
