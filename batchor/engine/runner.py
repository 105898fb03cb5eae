"""The waves of one apply: SQL, reduce, realtime and batch steps in the order their inputs allow.

A wave is the steps whose inputs are ready. Its SQL and reduce steps run first, then its model steps
are scanned together (engine/work.py) and sent side by side: realtime by the realtime executor,
batch by the batch executor; realtime steps of later waves start row by row as their inputs are
stored (engine/pipeline.py), and a batch step's other models get waves of their own
(engine/other_models.py). One event loop serves every wave and the providers' close.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from typing import Any, Coroutine, Iterator

from batchor.engine.batch import BatchExecutor, BatchOptions
from batchor.engine.batch_handover import realtime_after_batches
from batchor.engine.budget import Budget
from batchor.engine.cache_fees import CacheFeeLedger
from batchor.engine.clients import StepClients, build_clients
from batchor.engine.events import Event, Progress
from batchor.engine.held import held_if_small
from batchor.engine.interrupts import Interrupts, grace_seconds
from batchor.engine.limits import RunLimits
from batchor.engine.other_models import Wave, next_waves, recount
from batchor.engine.pipeline import Pipeline, PipelinedExecutor, PipelineSink, followers
from batchor.engine.realtime import RealtimeExecutor
from batchor.engine.reduce_run import ReduceRun, RoundWork
from batchor.engine.resolve_run import ResolveRun
from batchor.engine.row_events import row_stream
from batchor.engine.run_types import ApplyOptions
from batchor.engine.sink import (
    KEEP_ATTACHED_S,
    ResultSink,
    flush_while_waiting,
    raise_if_write_failed,
    store_when_room,
)
from batchor.engine.sql_run import run_sql_step
from batchor.engine.types import StepRuntime, StopSignal, WorkItem
from batchor.engine.work import StepWork, scan_wave
from batchor.engine.workers import SharedRun
from batchor.errors import StalePlanError
from batchor.plan.model import StepPlan
from batchor.plan.plan_file import CompiledPlan
from batchor.plan.step_kind import PER_GROUP
from batchor.spec.model import LimitsSpec
from batchor.state.base import RunRecord, StateStore

BATCH_THRESHOLD = LimitsSpec.model_fields["batch_threshold"].default


class WaveRunner:
    """Runs the waves of one plan; owns providers and the run's signal handling."""

    def __init__(
        self,
        plan: CompiledPlan,
        store: StateStore,
        options: ApplyOptions,
        run: RunRecord,
        progress: Progress,
        limits: RunLimits,
    ) -> None:
        self.plan, self.store, self.options, self.run_record = plan, store, options, run
        self.shared: SharedRun | None = None  # set by apply_plan on a shared (PostgreSQL) state
        self.progress, self.limits = progress, limits
        self.stop = StopSignal()
        self.interrupts = Interrupts(self.stop, enabled=options.handle_signals, grace_s=grace_seconds())
        self.clients = StepClients()
        self.runtimes: dict[str, StepRuntime] = {}
        self.sinks: list[ResultSink] = []  # flushed once more whatever ends the run
        self.in_flight = 0  # provider batches left running (apply --no-wait)
        self._pipeline: Pipeline | None = None  # the current wave's followers (see pipeline.py)
        self.reduced: list[ReduceRun] = []  # reduce steps run (their groups feed the group outputs)
        self._feed: Pipeline | None = None  # ... until a realtime executor takes it
        self._user_emit = options.emit
        self._last_saved = time.monotonic()
        self.options = dataclasses.replace(options, emit=self._emit)
        self.rows = row_stream(plan, store, options.output_path, self.options.emit, options.row_events)

    @property
    def budget(self) -> Budget:
        return self.shared.budget if self.shared is not None else self._budget

    @functools.cached_property
    def _budget(self) -> Budget:
        budget = Budget(self.options.max_cost, carried=self.options.carried, source=self.options.max_cost_source)
        budget.cap_calls(self.options.max_calls)
        return budget

    def _emit(self, event: Event) -> None:
        """Pass events on; every few seconds also store the run's progress so `status` sees it."""
        self._user_emit(event)
        if event.type == "progress" and self.shared is None and time.monotonic() - self._last_saved >= 2.0:
            self._last_saved = time.monotonic()
            p, r = self.progress, self.run_record
            r.requests, r.succeeded, r.failed, r.cached = p.total, p.succeeded, p.failed, p.cached
            r.skipped, r.cost_usd = p.skipped, p.cost_usd
            r.input_tokens, r.output_tokens = p.input_tokens, p.output_tokens
            # Off the event loop (a state write takes milliseconds); the loop's Runner waits for it on
            # close, so it lands before the final finish_run in _finish.
            save = functools.partial(self.store.finish_run, dataclasses.replace(r), final=False)
            try:
                saving = asyncio.get_running_loop().run_in_executor(None, save)
            except RuntimeError:  # no event loop here
                save()
            else:  # best effort: a failed save (disk full) is reported by the run's end, not logged here
                saving.add_done_callback(lambda done: done.cancelled() or done.exception())

    def run(self) -> StopSignal:
        # One event loop for every wave and the final close: SDK clients keep connections bound
        # to the loop that opened them, so closing them on a fresh loop fails.
        with asyncio.Runner() as runner:
            try:
                done: set[str] = set()
                for wave in self.plan.header.waves():
                    wave = [s for s in wave if s.name not in done]  # pipelined into an earlier wave
                    for step in (s for s in wave if s.local):
                        self._run_sql(step)
                    for step in (s for s in wave if s.kind == "reduce"):
                        self._run_reduce(runner, step)
                    for step in (s for s in wave if s.kind == "resolve"):
                        self._run_resolve(runner, step)
                    works = self._scan([s for s in wave if not s.local and s.kind not in PER_GROUP])
                    if self.rows is not None:  # rows finished by SQL and reduce steps, cached answers, earlier runs
                        self.rows.resync()
                    done |= {s.name for s in wave}
                    self._pipeline = self._feed = self._start_pipeline(works, done)
                    if any(w.pending for w in works):
                        self._run_wave(runner, works)
                    self._other_models(runner, works)
                    self._follow_fallbacks()
                    if self._pipeline is not None and self._pipeline.complete:
                        done |= set(self._pipeline.followers)
                    if self.in_flight:  # --no-wait: later waves need these answers first
                        self.stop.stop("in_flight", f"{self.in_flight} provider batch(es) in flight")
                    if self.stop.stopped:
                        break
            finally:
                runner.run(self._close_providers())
        self.flush_sinks()
        signals = self.interrupts.count
        store_when_room(self.sinks, self.options.emit, given_up=lambda: self.interrupts.count > signals)
        self._close_rows()
        raise_if_write_failed(self.sinks)
        return self.stop

    def _close_rows(self) -> None:
        if self.rows is None:
            return
        self.rows.close()
        if self.rows.error is not None:
            self.options.emit(Event("output_stream_stopped", {"error": self.rows.error}))

    def _run_wave(self, runner: asyncio.Runner, works: list[StepWork]) -> None:
        """One wave on the loop; calls cancelled by a second signal end the wave, not the run."""
        self._on_loop(runner, self._execute_wave(works))

    def _on_loop(self, runner: asyncio.Runner, wave: Coroutine[Any, Any, None]) -> None:
        try:
            runner.run(wave)
        except asyncio.CancelledError:
            if not self.interrupts.hard:
                raise
        finally:
            self.interrupts.detach()

    def _other_models(self, runner: asyncio.Runner, works: list[StepWork]) -> None:
        """A batch step's rows for its fallback and escalation models, wave after wave, until
        none is left (engine/other_models.py); on a shared run each worker sends the part it claims."""
        for step in (w.step for w in works if w.step.mode == "batch" and w.step.other_models):
            for _ in range(len(step.fallbacks) + 2):  # each fallback model in turn, the escalation
                if self.stop.stopped or self.in_flight:
                    return
                self._follow_fallbacks()
                runtime = self.runtimes.get(step.name) or self.clients.add(step, self.limits)
                waves = next_waves(self.plan, self.store, runtime)
                if not waves:
                    break
                for reason in ("fallback", "escalate"):  # apart, to count their rows (recount)
                    answered = self.progress.succeeded
                    self._on_loop(runner, self._execute_other([w for w in waves if w.reason == reason]))
                    recount(self.progress, reason, self.progress.succeeded - answered)

    async def _execute_other(self, waves: list[Wave]) -> None:
        """Waves of other models side by side: in a batch, or realtime (rows of theirs still in a
        live batch are collected first, never sent twice: engine/batch_handover.py)."""
        if not waves:
            return
        self.interrupts.attach(asyncio.get_running_loop())
        threshold = int((self.plan.header.spec.get("limits") or {}).get("batch_threshold") or BATCH_THRESHOLD)
        jobs = []
        for wave in waves:
            batch = wave.in_batch(threshold)
            work = wave.work(batch)
            runtimes = {work.step.name: dataclasses.replace(wave.runtime, plan=work.step)}
            self.progress.total += len(wave.items)
            model = f"{work.step.provider}:{work.step.model}"
            self.options.emit(
                Event(
                    "step_started",
                    {"step": work.step.name, "model": model, "pending": len(wave.items), "for": wave.reason},
                )
            )
            send = functools.partial(self._execute, runtimes=runtimes)
            collect = functools.partial(self._execute_batches, runtimes=runtimes)
            if self.shared is not None:  # several workers: each claims part of the wave
                jobs.append(self.shared.run_wave([work], send, collect, self.stop))  # type: ignore[list-item]
            elif batch:
                jobs.append(collect([work]))  # type: ignore[list-item]  # a StepWork in shape
            else:
                jobs.append(realtime_after_batches([work], self.store, send, collect))  # type: ignore[list-item]
        await asyncio.gather(*jobs)

    def _follow_fallbacks(self) -> None:
        """Rows answered by a fallback model read that answer (engine/fallback.py)."""
        self.flush_sinks()
        self.store.follow_fallbacks(self.plan.job_id, [s.name for s in self.plan.header.steps if s.other_models])

    def flush_sinks(self) -> None:
        """Store what the sinks still hold (answers that arrived before a cancel or an error)."""
        for sink in self.sinks:
            try:
                sink.flush_sync()
            except Exception:  # noqa: BLE001 - the error that ended the run is the one to report
                pass

    def _start_pipeline(self, works: list[StepWork], done: set[str]) -> Pipeline | None:
        """Realtime steps of later waves that start row by row during this wave (see pipeline.py).

        Not in shared (PostgreSQL) runs, where workers claim each wave's requests, nor in mock
        rehearsals, whose instant answers gain nothing from it (the answers are the same)."""
        if self.shared is not None or self.plan.header.mocked or self.limits.pipeline is False:
            return None
        if not any(w.pending and w.step.mode != "batch" for w in works):
            return None
        steps = followers(self.plan.header.steps, done, [w.step for w in works], set(self.runtimes))
        if not steps:
            return None
        pipeline = Pipeline(
            self.plan,
            self.store,
            works,
            steps,
            refresh=self.options.refresh,
            progress=self.progress,
            stop=self.stop,
            retry_failed=self.options.retry_failed or self.plan.header.retry_failed,
        )
        for step in steps:
            self.options.emit(Event("step_started", {"step": step.name, "pipelined": True}))
        return pipeline

    def _scan(self, steps: list[StepPlan]) -> list[StepWork]:
        """A wave's steps scanned together (engine/work.py `scan_wave`: a few state queries for
        any number of steps), then each checked against the plan and announced."""
        retry_failed = self.options.retry_failed or self.plan.header.retry_failed
        works = [
            StepWork(self.plan, step, self.store, refresh=self._refreshed(step), retry_failed=retry_failed)
            for step in steps
        ]
        with held_if_small(self.plan, self.store):
            scan_wave(works)
            self.store.follow_fallbacks(self.plan.job_id, [step.name for step in steps if step.other_models])
        for work in works:
            self._announce(work, retry_failed)
        return works

    def _refreshed(self, step: StepPlan) -> bool:
        return step.name in self.options.refresh or "*" in self.options.refresh

    def _announce(self, work: StepWork, retry_failed: bool) -> None:
        step, refresh = work.step, work.refresh
        planned = step.counts.to_run + step.counts.too_long + (step.counts.failed_earlier if retry_failed else 0)
        if not step.depends_on and not refresh and len(work.pending) > planned:
            gone = len(work.pending) - planned
            raise StalePlanError(
                f"plan {self.plan.plan_id} is stale: {gone} answer(s) it counted as cached for step "
                f"'{step.name}' are no longer in the state",
                hint="re-plan with `batchor plan SPEC`",
            )
        p = self.progress
        p.total += len(work.pending)
        p.cached += work.cached
        p.skipped += work.skipped
        self.options.emit(
            Event(
                "step_started",
                {"step": step.name, "pending": len(work.pending), "cached": work.cached, "skipped": work.skipped},
            )
        )

    def _run_sql(self, step: StepPlan) -> None:
        answered, left_out = run_sql_step(self.plan, step, self.store, self.run_record.run_id)
        self.progress.skipped += left_out
        self.options.emit(
            Event("step_finished", {"step": step.name, "kind": "sql", "rows": answered, "left_out": left_out})
        )

    def _run_reduce(self, runner: asyncio.Runner, step: StepPlan) -> None:
        """A reduce step round by round (engine/reduce_run.py): each round is a wave of its own."""
        refresh = step.name in self.options.refresh or "*" in self.options.refresh
        retry_failed = self.options.retry_failed or self.plan.header.retry_failed
        reduce = ReduceRun(self.plan, step, self.store, refresh=refresh, retry_failed=retry_failed)
        self.options.emit(Event("step_started", {"step": step.name, "groups": len(reduce.groups)}))
        self.progress.skipped += len(reduce.skipped)
        while not self.stop.stopped and not self.in_flight:
            items = reduce.pending()
            if not items:
                break
            self.progress.total += len(items)
            self._feed = None
            self._run_wave(runner, [RoundWork(self.plan, step, self.store, items)])
        reduce.record()
        self.reduced.append(reduce)

    def _run_resolve(self, runner: asyncio.Runner, step: StepPlan) -> None:
        """A resolve step round by round (engine/resolve_run.py): pairs, then canonical requests."""
        refresh = step.name in self.options.refresh or "*" in self.options.refresh
        retry_failed = self.options.retry_failed or self.plan.header.retry_failed
        resolve = ResolveRun(self.plan, step, self.store, refresh=refresh, retry_failed=retry_failed)
        self.options.emit(Event("step_started", {"step": step.name, "rows": len(resolve.members)}))
        self.progress.skipped += len(resolve.skipped)
        while not self.stop.stopped and not self.in_flight:
            sender, items = resolve.pending()
            if not items:
                break
            self.progress.total += len(items)
            self._feed = None
            self._run_wave(runner, [RoundWork(self.plan, sender, self.store, items)])
        answered = resolve.record(self.run_record.run_id)
        self.options.emit(Event("step_finished", {"step": step.name, "kind": "resolve", "rows": answered}))

    def create_providers(self) -> None:
        """Build clients for steps with work; a missing key fails here, before any call and
        before the run is recorded (a configuration problem is no failed run)."""
        fees = CacheFeeLedger(self.store, self.run_record.run_id, self.plan.header.steps, self._cache_fee_spent)
        self.clients = build_clients(self.plan, self.limits, self.options.refresh, fees)
        self.runtimes = self.clients.runtimes

    def _cache_fee_spent(self, usd: float, step: str) -> None:
        """A cache's fee recorded (engine/cache_fees.py): in the budget and the run's running spend."""
        self.budget.settle(0.0, usd)
        self.progress.add_spend(usd, 0, 0, wasted=False, estimated=False, step=step or None)

    async def _execute_wave(self, works: list[StepWork]) -> None:
        """Realtime steps and batch steps of one wave side by side, under one signal handler."""
        self.interrupts.attach(asyncio.get_running_loop())
        if self.shared is not None:  # several workers: run only the slices this one claims
            await self.shared.run_wave(works, self._execute, self._execute_batches, self.stop)
            return
        batch = [w for w in works if w.step.mode == "batch" and w.pending]
        realtime = [w for w in works if w.step.mode != "batch" and w.pending]
        jobs = [realtime_after_batches(realtime, self.store, self._execute, self._execute_batches)] if realtime else []
        if batch:
            jobs.append(self._execute_batches(batch))
        await asyncio.gather(*jobs)

    async def _execute(self, items: Iterator[WorkItem], runtimes: dict[str, StepRuntime] | None = None) -> None:
        # Shared state commits answers in small groups (SharedRun.sink_options): a worker that dies
        # loses its requests in flight and its last group, which others ask again.
        feed, self._feed = (None, self._feed) if runtimes else (self._feed, None)  # a wave's pipeline feeds
        # its first realtime run only; another model's wave (runtimes) never
        sink_args = (self.store, self.run_record.run_id)
        sink_options: dict[str, Any] = {
            "keep_raw": self.plan.header.keep_raw,
            "before_store": self.rows.stored if self.rows else None,
            "on_failed": lambda failed: self.stop.stop(failed.code, failed.message),  # stop sending at once
            **(self.shared.sink_options() if self.shared is not None else {}),
        }
        sink = PipelineSink(feed, *sink_args, **sink_options) if feed else ResultSink(*sink_args, **sink_options)
        self.sinks.append(sink)
        options: dict[str, Any] = {
            "limits": self.limits,
            "budget": self.budget,
            "sink": sink,
            "progress": self.progress,
            "emit": self.options.emit,
            "stop": self.stop,
            "seed": self.options.seed,
        }
        executor = (
            PipelinedExecutor(feed, self.runtimes, **options)
            if feed
            else RealtimeExecutor(runtimes or self.runtimes, **options)
        )
        if self.shared is not None:
            executor.limiter = self.shared.limiter(executor.limiter, runtimes or self.runtimes)
        ticker = asyncio.create_task(flush_while_waiting(sink))
        try:
            with self.store.kept_attached(KEEP_ATTACHED_S):  # flushes skip most attach/checkpoint cycles
                await executor.run(items)
        finally:
            ticker.cancel()
        if feed:
            await feed.finish()

    async def _execute_batches(self, works: list[StepWork], runtimes: dict[str, StepRuntime] | None = None) -> None:
        sink = ResultSink(
            self.store,
            self.run_record.run_id,
            keep_raw=self.plan.header.keep_raw,
            flush_rows=1 << 30,
            flush_interval_s=1e9,
            before_store=self.rows.stored if self.rows else None,
        )  # flushed once per collected batch
        self.sinks.append(sink)
        executor = BatchExecutor(
            runtimes or self.runtimes,
            store=self.store,
            run_id=self.run_record.run_id,
            job_id=self.plan.job_id,
            limits=self.limits,
            budget=self.budget,
            sink=sink,
            progress=self.progress,
            emit=self.options.emit,
            stop=self.stop,
            ready=self.clients.take_batch if runtimes is None else lambda step: None,  # another model's: its own
            options=BatchOptions(
                wait=self.options.wait,
                sleep=self.options.sleep,
                clock=self.options.clock or time.time,
                fees=self.clients.fees,
            ),
        )
        self.in_flight += await executor.run(works)

    async def _close_providers(self) -> None:
        await self.clients.aclose()
