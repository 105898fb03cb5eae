"""Row-level pipelining of realtime steps: a later step's request for a row is rendered and sent
as soon as that row's upstream answers are stored, not after the whole earlier step.

A stage runs the scanned steps of a wave plus their *followers*: realtime LLM steps whose inputs
are all either finished before the stage or realtime LLM steps of the stage. One executor sends
both: the stage's own requests, and follower requests as the answers they need are flushed to
the state. SQL steps (they need every row) and batch steps stay barriers, and a shared
(PostgreSQL) run keeps waves. Follower requests are rendered with the plan's pinned templates,
checked against the cache, deduplicated, counted and recorded (row -> request) like a scan would,
so answers and counts are the same as wave by wave.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from batchor.engine.events import Progress
from batchor.engine.realtime import RealtimeExecutor
from batchor.engine.rows import JobRows, input_values, needed_values
from batchor.engine.sink import ResultSink, state_write_error
from batchor.engine.types import StopSignal, WorkItem
from batchor.engine.work import StepWork
from batchor.errors import DiskFullError, StateWriteError
from batchor.plan.fanout_rows import Row, order_steps
from batchor.plan.model import StepPlan
from batchor.plan.plan_file import CompiledPlan
from batchor.plan.request import RenderedRequest, StepRequests, pinned_requests
from batchor.plan.step_kind import PER_GROUP
from batchor.state.base import StateStore
from batchor.state.cache import deterministic_codes
from batchor.state.step_maps import map_table, per_step

NO_ANSWER = object()  # skipped or failed upstream: rows that need it are skipped, as in wave mode


def followers(steps: list[StepPlan], done: set[str], stage: list[StepPlan], runnable: set[str]) -> list[StepPlan]:
    """Later realtime LLM steps whose inputs are finished (`done`) or realtime LLM steps of the stage."""
    live = {s.name for s in stage if s.mode != "batch"}
    chosen: list[StepPlan] = []
    for step in order_steps(steps):
        if (
            step.name in done
            or step.name in live
            or step.local
            or step.mode == "batch"
            or step.kind in PER_GROUP
            or step.gather  # it reads other rows' answers: after the stage, like a reduce
        ):
            continue
        if step.name in runnable and set(step.depends_on) <= done | live and set(step.depends_on) & live:
            chosen.append(step)
            live.add(step.name)
    return chosen


@dataclass(eq=False)
class _Waiting:
    """A follower row waiting for upstream answers of its stage."""

    step: str
    row: Row
    context: dict[str, Any]
    missing: int
    done: bool = False


class Pipeline:
    """The follower rows of one stage, released as the answers they need are stored."""

    def __init__(
        self,
        plan: CompiledPlan,
        store: StateStore,
        works: list[StepWork],
        steps: list[StepPlan],
        *,
        refresh: frozenset[str],
        progress: Progress,
        stop: StopSignal,
        retry_failed: bool = False,
    ) -> None:
        self.plan, self.store, self.progress, self.stop = plan, store, progress, stop
        self.retry_failed = retry_failed  # False: requests that failed for good earlier are not sent
        self.error: BaseException | None = None
        self.plans = {s.name: s for s in plan.header.steps}
        self.followers = {s.name: s for s in steps}
        self.stage = {w.step.name for w in works if w.step.mode != "batch"} | set(self.followers)
        self.requests: dict[str, StepRequests] = {}
        self.fresh = {s for s in self.followers if s in refresh or "*" in refresh}  # no cache lookups
        self.values: dict[str, dict[str, Any]] = defaultdict(dict)  # step -> row key -> answer
        self.rows_of_key: dict[str, dict[str, list[str]]] = defaultdict(dict)  # step -> request -> rows
        self.answered: dict[str, dict[str, tuple[Any, bool]]] = defaultdict(dict)  # -> (answer, from cache)
        self.waiters: dict[tuple[str, str], list[_Waiting]] = defaultdict(list)
        self.unchecked: list[tuple[str, RenderedRequest]] = []  # new follower requests
        self.records: dict[str, list[tuple[str, str | None]]] = defaultdict(list)  # rows -> requests to store
        self.queue: deque[WorkItem] = deque()
        self.outstanding = 0  # sent requests whose answer is not stored yet
        self.wake = asyncio.Event()
        self._checks: asyncio.Task | None = None
        self.sink: ResultSink | None = None
        self._load_stage([w for w in works if w.step.mode != "batch"])
        # The followers' row maps are recorded again row by row (see StepWork.scan): one query for all.
        self._write_maps(map_table([]), forget=list(self.followers))
        ready = [w for step in steps for w in self._register(step)]
        for waiting in ready:
            self._release(waiting)
        while self.unchecked:  # before the stage starts: the same lookups, synchronously
            batch, records = self._take()
            self._checked(batch, *self._look_up(batch, records))

    # --- stage start -----------------------------------------------------------------------

    def _load_stage(self, works: list[StepWork]) -> None:
        """The scanned steps' stored answers, read in one query."""
        if not works:
            return
        names = [w.step.name for w in works]
        found = self.store.job_results_for_steps(self.plan.job_id, names)
        for work, table in zip(works, per_step(found, names)):
            self._load_stage_step(work, table)

    def _load_stage_step(self, work: StepWork, table: pa.Table) -> None:
        """Answers of a scanned step: stored ones are known, pending ones are awaited."""
        name = work.step.name
        awaited = work.pending.mask(table.column("request_key")).to_pylist()
        for row_key, key, status, output, wait in zip(
            *(table.column(c).to_pylist() for c in ("row_key", "request_key", "status", "output")), awaited
        ):
            if wait:  # (--refresh: even when an answer is stored)
                self.rows_of_key[name].setdefault(key, []).append(row_key)
            else:
                self.values[name][row_key] = self._parse(name, output) if status == "succeeded" else NO_ANSWER

    def _register(self, step: StepPlan) -> list[_Waiting]:
        """Every row of a follower, waiting on the stage answers it needs; returns those ready now."""
        self.requests[step.name] = requests = pinned_requests(
            step, self.plan.header.base_dir, self.plan.header.spec.get("templates")
        )
        tpl = requests.templates
        in_stage = [d for d in step.depends_on if d in self.stage]
        before = step.model_copy(update={"depends_on": [d for d in step.depends_on if d not in in_stage]})
        rows_of, ready = JobRows(self.plan, self.store), []
        for inputs, rows in rows_of.batches(step.grain):
            values = needed_values(input_values(inputs), tpl)
            for row in rows:
                waiting = _Waiting(step.name, row, {"row": values[row.index], **rows_of.upstream(before, row)}, 0)
                for dep in in_stage:
                    key = row.keys[self.plans[dep].grain]
                    if key in self.values[dep]:
                        waiting.context[dep] = self.values[dep][key]
                    else:
                        waiting.missing += 1
                        self.waiters[(dep, key)].append(waiting)
                if waiting.missing == 0:
                    ready.append(waiting)
        return ready

    # --- rows released by answers ----------------------------------------------------------

    def _release(self, waiting: _Waiting) -> None:
        """All inputs known: render the row's request, or skip it."""
        if waiting.done:
            return
        waiting.done = True
        step, row_key = waiting.step, waiting.row.key
        if any(v is None or v is NO_ANSWER for k, v in waiting.context.items() if k != "row"):
            return self._skip(step, row_key)
        request = self.requests[step].render(row_key, waiting.context)
        if request is None:
            return self._skip(step, row_key)
        key = request.key
        self.records[step].append((row_key, key))
        if key in self.answered[step]:  # asked (or found) earlier in this stage
            answer, cached = self.answered[step][key]
            self.progress.cached += cached
            return self._deliver(step, row_key, answer)
        if key in self.rows_of_key[step]:  # already on its way
            self.rows_of_key[step][key].append(row_key)
            return None
        self.rows_of_key[step][key] = [row_key]
        self.unchecked.append((step, request))
        return None

    def _skip(self, step: str, row_key: str) -> None:
        self.progress.skipped += 1
        self.records[step].append((row_key, None))
        self._deliver(step, row_key, NO_ANSWER)

    def _deliver(self, step: str, row_key: str, answer: Any) -> None:
        """A row of `step` has its answer (or none): release the follower rows waiting for it."""
        self.values[step][row_key] = answer
        for waiting in self.waiters.pop((step, row_key), []):
            waiting.context[step] = answer
            waiting.missing -= 1
            if waiting.missing == 0 or answer is NO_ANSWER:
                self._release(waiting)

    def stored(self, results: list[tuple[str, str, str, str | None]]) -> None:
        """Answers now in the state (step, request key, status, output): release their rows."""
        for step, key, status, output in results:
            self.outstanding -= 1
            answer = self._parse(step, output) if status == "succeeded" else NO_ANSWER
            if step in self.followers:
                self.answered[step][key] = (answer, False)
            for row_key in self.rows_of_key[step].pop(key, []):
                self._deliver(step, row_key, answer)
        if self.unchecked and self._checks is None:
            self._checks = asyncio.get_running_loop().create_task(self._check_loop())
        self.wake.set()

    # --- cache lookups of new follower requests --------------------------------------------

    def _take(self) -> tuple[list[tuple[str, RenderedRequest]], dict[str, list[tuple[str, str | None]]]]:
        batch, self.unchecked = self.unchecked, []
        records, self.records = self.records, defaultdict(list)
        return batch, records

    def _look_up(
        self, batch: list[tuple[str, RenderedRequest]], records: dict[str, list]
    ) -> tuple[dict, set[str], list[int]]:
        """Off the event loop: store the row -> request records, find cached answers and requests
        that failed for good earlier, count tokens."""
        self._record(records)
        keys = [request.key for step, request in batch if step not in self.fresh]
        found = self.store.results_for_keys(pa.array(keys, pa.string())) if keys else None
        cached = {}
        if found is not None:
            for key, status, output in zip(*(found.column(c).to_pylist() for c in ("request_key", "status", "output"))):
                if status == "succeeded":
                    cached[key] = output
        settled: set[str] = set()
        if keys and not self.retry_failed:
            settled.update(self.store.failed_key_array(pa.array(keys, pa.string()), deterministic_codes()).to_pylist())
        return cached, settled, self._tokens(batch)

    def _tokens(self, batch: list[tuple[str, RenderedRequest]]) -> list[int]:
        tokens = [0] * len(batch)
        for step, requests in self.requests.items():
            at = [i for i, (s, _) in enumerate(batch) if s == step]
            for i, n in zip(at, requests.tokens([batch[i][1] for i in at])):
                tokens[i] = n or 0
        return tokens

    def _checked(
        self, batch: list[tuple[str, RenderedRequest]], cached: dict[str, str], settled: set[str], tokens: list[int]
    ) -> None:
        for (step, request), n in zip(batch, tokens):
            key = request.key
            if key in settled:  # failed for good earlier: its rows stay failed, later steps skip them
                self.answered[step][key] = (NO_ANSWER, False)
                for row_key in self.rows_of_key[step].pop(key, []):
                    self._deliver(step, row_key, NO_ANSWER)
            elif key in cached:
                answer = self._parse(step, cached[key])
                self.answered[step][key] = (answer, True)
                rows = self.rows_of_key[step].pop(key, [])
                self.progress.cached += len(rows)
                for row_key in rows:
                    self._deliver(step, row_key, answer)
            else:
                self.progress.total += 1
                self.queue.append(WorkItem(key, step, request.messages, n))

    async def _check_loop(self) -> None:
        try:
            while self.unchecked:
                batch, records = self._take()
                self._checked(batch, *await asyncio.to_thread(self._look_up, batch, records))
        except Exception as exc:  # noqa: BLE001 - raised again by finish()
            self.fail(exc)
        finally:
            self._checks = None
            self.wake.set()

    def fail(self, exc: BaseException) -> None:
        """Stop sending (a template failed on a row, the state failed); `finish` raises it. A failed
        row map write ends the run as a failed result write does (engine/sink.py): the answers in
        memory are kept until stored, and the next apply maps the rows again."""
        if isinstance(exc, (DiskFullError, StateWriteError)) and self.sink is not None:
            self.sink.fail(exc)
            return
        self.error = self.error or exc
        self.stop.stop("error", str(exc))

    def _record(self, records: dict[str, list[tuple[str, str | None]]]) -> None:
        """The rows -> requests of every step released meanwhile, in one write."""
        triples = [(step, row, key) for step, pairs in records.items() for row, key in pairs]
        if triples:
            self._write_maps(map_table(triples))

    def _write_maps(self, table: pa.Table, forget: list[str] | None = None) -> None:
        """Record row -> request maps; a failed write raised by its code, never the database's error."""
        try:
            self.store.record_step_requests(self.plan.job_id, table, forget=forget or ())
        except Exception as exc:  # every failed write is told by its code
            steps = ", ".join(sorted(set(table.column("step").to_pylist()) | set(forget or ())))
            raise state_write_error(exc, f"{self.store.location} (the row -> request map of {steps})") from exc

    # --- the executor's side ---------------------------------------------------------------

    def items(self, own: Iterator[WorkItem]) -> Iterator[WorkItem]:
        """Requests ready now: follower requests first (they finish rows), then the stage's own."""
        while True:
            item = self.queue.popleft() if self.queue else next(own, None)
            if item is None:
                return
            self.outstanding += 1
            yield item

    @property
    def complete(self) -> bool:
        """Every follower row got its request (or was skipped): the followers need no wave."""
        return self.error is None and not (
            self.waiters or self.queue or self.unchecked or any(self.rows_of_key[f] for f in self.followers)
        )

    async def more(self) -> bool:
        """Wait until follower requests are ready; False once none can come (or the run stops)."""
        assert self.sink is not None
        while not self.stop.stopped:
            if self.queue:
                return True
            await self.sink.flush()  # buffered answers release their rows once stored
            if self.queue:
                return True
            if self._checks is None and not self.unchecked and self.outstanding <= 0:
                return False
            self.wake.clear()
            try:
                await asyncio.wait_for(self.wake.wait(), self.sink.flush_interval_s)
            except TimeoutError:
                pass
        return False

    async def finish(self) -> None:
        """Store the remaining row -> request records; raise what stopped the pipeline, if anything."""
        if self._checks is not None:
            await self._checks
        try:
            await asyncio.to_thread(self._record, self._take()[1])
        except (DiskFullError, StateWriteError) as exc:  # the run ends with it, after what is bought is stored
            self.fail(exc)
        if self.error is not None:
            raise self.error

    def _parse(self, step: str, output: str | None) -> Any:
        return json.loads(output) if output is not None and self.plans[step].json_answers else output


class PipelineSink(ResultSink):
    """A result sink that tells the pipeline which answers each flush stored."""

    def __init__(self, pipeline: Pipeline, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pipeline = pipeline
        self._added: list[tuple[str, str, str, str | None]] = []
        pipeline.sink = self

    def add_result(self, **fields: Any) -> None:
        super().add_result(**fields)
        if fields.get("fallback_for"):  # rows wait on the request it stands for (added next)
            return
        answered = fields.get("answered_by") is not None  # a fallback model answered the row instead
        status, output = ("succeeded", fields["answer"]) if answered else (fields["status"], fields["output"])
        self._added.append((fields["step"], fields["key"], status, output))

    async def flush(self) -> bool:
        added, self._added = self._added, []  # all of these are written by the flush below
        if not await super().flush():  # the disk is full: they are still only in memory
            self._added[:0] = added
            return False
        if added:
            try:
                self.pipeline.stored(added)
            except Exception as exc:  # noqa: BLE001 - a worker must not die: stop, raise after the run
                self.pipeline.fail(exc)
        return True


class PipelinedExecutor(RealtimeExecutor):
    """The realtime executor fed by a pipeline: it keeps sending while stored answers release rows."""

    def __init__(self, pipeline: Pipeline, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pipeline = pipeline

    async def _produce(self, items: Iterable[WorkItem], queue: asyncio.Queue) -> None:
        own = iter(items)
        while True:
            await super()._produce(self.pipeline.items(own), queue)
            if not await self.pipeline.more():
                return
