"""Apply: execute exactly one compiled plan against the state, then write the output.

Order of checks before any call: budget (upper bound vs --max-cost, unpriced models), the plan
still matches its input and the cache, the provider keys exist. Then steps run wave by wave
(a wave = steps whose inputs are ready), and realtime steps of later waves start row by row as
their inputs are stored (pipeline.py); every answer is stored as it arrives.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import functools
import time
import uuid
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Coroutine, Iterator

from batchor.engine.batch import BatchExecutor, BatchOptions
from batchor.engine.batch_handover import realtime_after_batches
from batchor.engine.budget import CLI_SOURCE, Budget, effective_max_cost, plan_budget, raise_hint
from batchor.engine.clients import StepClients, build_clients
from batchor.engine.events import Event, EventSink, Progress, ignore
from batchor.engine.interrupts import Interrupts, grace_seconds, off_running_loop
from batchor.engine.limits import RunLimits
from batchor.engine.other_models import Wave, next_waves
from batchor.engine.outcome import (
    derive_status,
    error_status,
    finish_after_error,
    output_not_written,
    settle_earlier_runs,
    status_reason,
    stored_counts,
)
from batchor.engine.pipeline import Pipeline, PipelinedExecutor, PipelineSink, followers
from batchor.engine.realtime import RealtimeExecutor
from batchor.engine.reduce_run import ReduceRun, RoundWork, write_group_outputs
from batchor.engine.row_events import row_stream
from batchor.engine.sink import KEEP_ATTACHED_S, ResultSink, raise_if_disk_filled
from batchor.engine.sql_run import run_sql_step
from batchor.engine.types import StepRuntime, StopSignal, WorkItem
from batchor.engine.work import StepWork, scan_wave
from batchor.engine.workers import SharedRun
from batchor.errors import CostLimitError, CostUnboundedError, NoPriceError, OutputError, StalePlanError
from batchor.humanize import money
from batchor.outputs.export import check_output_target, is_small, row_counts, write_output_and_count
from batchor.plan.compile import check_input_unchanged
from batchor.plan.estimate import step_estimates
from batchor.plan.model import StepPlan
from batchor.plan.plan_file import CompiledPlan
from batchor.plan.sql_files import changed_sql_file
from batchor.spec.model import LimitsSpec
from batchor.state.answer_stats import record_run_steps, run_step_report
from batchor.state.base import RunRecord, RunStatus, StateStore
from batchor.state.postgres_store import PostgresStore
from batchor.state.spend import failure_costs, unfinished_job_spend


@dataclass
class ApplyOptions:
    max_cost: float | None = None
    max_cost_source: str = CLI_SOURCE  # where the budget comes from (see budget.effective_max_cost)
    carried: float = 0.0  # what the job's unfinished earlier runs spent: it counts against the budget
    refresh: frozenset[str] = frozenset()
    retry_failed: bool = False  # also send requests that failed for good earlier (deterministic errors)
    emit: EventSink = ignore
    output_path: Path | None = None
    handle_signals: bool = True
    seed: int | None = None
    limits: dict[str, Any] = field(default_factory=dict)  # overrides of the plan's limits
    wait: bool = True  # False: submit batch work and return (apply --no-wait)
    sleep: Any = None  # injected async sleep for batch polling (tests); None: real time
    clock: Any = None  # injected epoch clock for batch ages (tests, with `sleep`); None: time.time
    run_kind: str = "apply"  # what the run's answers are in the estimate's history: apply | pilot
    max_calls: int | None = None  # the most attempts this run may send, re-asks included (a pilot's allowance)
    force: bool = False  # the spec's output may replace a file batchor did not write (outputs/written.py)
    row_events: bool = False  # emit `row_finished` per finished row (apply --json, on_row)


@dataclass
class RunOutcome:
    run_id: str
    status: RunStatus
    stop_reason: str | None
    progress: dict[str, Any]
    output_path: str | None
    cost_usd: float
    duration_s: float
    cached: int
    skipped: int
    requests: int
    steps: list[dict[str, Any]] = field(default_factory=list)  # per step: the plan's estimate next to the spend
    output_error: OutputError | None = None  # the rows were judged and recorded, but the file was not written


BATCH_THRESHOLD = LimitsSpec.model_fields["batch_threshold"].default


def check_budget(plan: CompiledPlan, max_cost: float | None, carried: float = 0.0) -> None:
    """Refuse before any call when the plan's upper bound passes the budget: the lower of
    --max-cost and the spec's `limits.max_cost_usd`, less what the job's unfinished earlier runs
    spent (`carried`: a budget covers a job across its resumes)."""
    max_cost, source = plan_budget(max_cost, plan.header)
    if max_cost is None:
        return
    totals = plan.header.totals
    if totals.unpriced_models:
        raise NoPriceError(
            f"no price known for {', '.join(totals.unpriced_models)}, so {source} cannot be enforced",
            hint="add `price: {input_per_mtok: ..., output_per_mtok: ...}` to the model block",
        )
    if totals.unbounded:
        raise CostUnboundedError(
            f"step(s) {', '.join(totals.unbounded)} run once per element of a fan-out with no bound, so the plan "
            f"has no upper-bound cost and {source} cannot be enforced; nothing was sent",
            hint="set `max_fanout:` on the fan-out SQL step, or `maxItems` on the list it unnests "
            "in the upstream step's schema",
            plan=plan,
        )
    if carried > 0 and totals.cost_upper + carried > max_cost + 1e-12:
        raise CostLimitError(
            f"this job's earlier runs spent {money(carried)} of {source} {money(max_cost)} (a budget covers the "
            f"job across its resumes), and the rest may cost up to {money(totals.cost_upper)}; nothing was sent",
            hint=raise_hint(source),
            plan=plan,
        )
    if totals.cost_upper > max_cost + 1e-12:
        raise CostLimitError(
            f"the plan may cost up to {money(totals.cost_upper)} (expected {money(totals.cost_expected)}), "
            f"above {source} {money(max_cost)}; nothing was sent",
            hint=f"raise {source}, lower max_tokens, or add input.limit",
            plan=plan,
        )


def _shared_budget(options: ApplyOptions) -> tuple[float | None, str]:
    """A shared run's budget row holds what is left for the job after its earlier runs."""
    left = None if options.max_cost is None else max(0.0, options.max_cost - options.carried)
    return left, options.max_cost_source


def apply_plan(plan: CompiledPlan, store: StateStore, options: ApplyOptions) -> RunOutcome:
    header = plan.header
    if plan_budget(options.max_cost, header)[0] is not None:
        carried, _ = unfinished_job_spend(store, plan.job_id, skip_live=isinstance(store, PostgresStore))
        options = dataclasses.replace(options, carried=carried)
    check_budget(plan, options.max_cost, options.carried)
    check_output_target(plan, options.output_path, store.location, options.force)
    reason = check_input_unchanged(header) or changed_sql_file(header)
    if reason:
        raise StalePlanError(f"plan {header.plan_id} is stale: {reason}", hint="re-plan with `batchor plan SPEC`")
    limits = RunLimits.merged(header.limits, options.limits)
    if header.mocked:
        limits = limits.without_rate_limits()
    max_cost, source = effective_max_cost(options.max_cost, limits.max_cost_usd)
    options = dataclasses.replace(options, max_cost=max_cost, max_cost_source=source or CLI_SOURCE)
    run = RunRecord(
        run_id=_new_run_id(),
        job_id=plan.job_id,
        plan_id=header.plan_id,
        name=header.name,
        mocked=header.mocked,
        plan_path=str(plan.saved_path) if plan.saved_path else None,
    )
    progress = Progress()
    runner = _Runner(plan, store, options, run, progress, limits)
    runner.create_providers()  # a missing key or a bad provider setting fails before a run is recorded
    # From here until the record is finished a signal stops the run; it never ends the process.
    with runner.interrupts:
        # A shared (PostgreSQL) state: join the job's live run as one of its workers, or start it.
        runner.shared = (
            SharedRun.join(store, run, progress, limits, options.emit, *_shared_budget(options))
            if isinstance(store, PostgresStore)
            else None
        )
        if runner.shared is None:
            store.start_run(run)
        else:
            runner.shared.budget.cap_calls(options.max_calls)
        record_run_steps(store, run.run_id, step_estimates(header), options.run_kind)
        options.emit(Event("run_started", {"run_id": run.run_id, "plan_id": header.plan_id, "name": header.name}))
        started = time.monotonic()
        try:
            stop = off_running_loop(runner.run, runner.stop)
            with _held_if_small(plan, store):
                outcome = _finish(plan, store, options, run, progress, stop, started, runner.shared)
            write_group_outputs(plan, store, Path(options.output_path or header.output.path), runner.reduced)
        except BaseException as exc:
            runner.flush_sinks()
            if runner.shared is not None:
                runner.shared.abandon(error_status(exc))
            else:
                finish_after_error(store, run, exc)
            raise
    if outcome.output_error is not None:  # recorded with the run; the command still fails on it
        raise outcome.output_error
    return outcome


class _Runner:
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
        self.options = _with_emit(options, self._emit)
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
                    works = self._scan([s for s in wave if not s.local and s.kind != "reduce"])
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
        self._close_rows()
        raise_if_disk_filled(self.sinks)
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
        none is left (engine/other_models.py). Shared runs leave them (each worker would send them)."""
        for step in (w.step for w in works if w.step.mode == "batch" and w.step.other_models):
            for _ in range(len(step.fallbacks) + 2):  # each fallback model in turn, the escalation
                if self.stop.stopped or self.in_flight or self.shared is not None:
                    return
                self._follow_fallbacks()
                runtime = self.runtimes.get(step.name) or self.clients.add(step, self.limits)
                waves = next_waves(self.plan, self.store, runtime)
                if not waves:
                    break
                for reason in ("fallback", "escalate"):  # apart, to count their rows (_recount)
                    answered = self.progress.succeeded
                    self._on_loop(runner, self._execute_other([w for w in waves if w.reason == reason]))
                    self._recount(reason, self.progress.succeeded - answered)

    def _recount(self, reason: str, answered: int) -> None:
        """A row another model answered is one row, as in realtime: a fallback's answer takes the
        place of the failure counted when the row's batch was collected (in this run, or not at all),
        an escalation's answer the place of the answer it replaces."""
        p = self.progress
        moved = min(answered, p.failed) if reason == "fallback" else answered
        if reason == "fallback":
            p.failed -= moved
        else:
            p.succeeded -= moved
        p.done -= moved

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
            if batch:
                jobs.append(self._execute_batches([work], runtimes))  # type: ignore[list-item]  # a StepWork in shape
            else:
                send = functools.partial(self._execute, runtimes=runtimes)
                collect = functools.partial(self._execute_batches, runtimes=runtimes)
                jobs.append(realtime_after_batches([work], self.store, send, collect))  # type: ignore[list-item]
        await asyncio.gather(*jobs)

    def _follow_fallbacks(self) -> None:
        """Rows answered by a fallback model read that answer (engine/fallback.py)."""
        self.flush_sinks()
        for step in self.plan.header.steps:
            if step.other_models:
                self.store.follow_fallbacks(self.plan.job_id, step.name)

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
        with _held_if_small(self.plan, self.store):
            scan_wave(works)
            for step in steps:
                if step.other_models:
                    self.store.follow_fallbacks(self.plan.job_id, step.name)
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

    def create_providers(self) -> None:
        """Build clients for steps with work; a missing key fails here, before any call and
        before the run is recorded (a configuration problem is no failed run)."""
        self.clients = build_clients(self.plan, self.limits, self.options.refresh)
        self.runtimes = self.clients.runtimes

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
            "on_full": lambda full: self.stop.stop("disk_full", full.message),  # stop sending at once
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
            executor.limiter = self.shared.limiter(executor.limiter, self.runtimes)
        ticker = asyncio.create_task(_flush_while_waiting(sink))
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
                wait=self.options.wait, sleep=self.options.sleep, clock=self.options.clock or time.time
            ),
        )
        self.in_flight += await executor.run(works)

    async def _close_providers(self) -> None:
        await self.clients.aclose()


async def _flush_while_waiting(sink: ResultSink) -> None:
    """Store answers at least every flush interval, also while every worker waits on a slow call
    (workers flush only when they finish one): a kill -9 then loses at most that interval."""
    while True:
        await asyncio.sleep(sink.flush_interval_s)
        if sink.due():
            await sink.flush()


def _with_emit(options: ApplyOptions, emit: EventSink) -> ApplyOptions:
    from dataclasses import replace

    return replace(options, emit=emit)


def _finish(
    plan: CompiledPlan,
    store: StateStore,
    options: ApplyOptions,
    run: RunRecord,
    progress: Progress,
    stop: StopSignal,
    started: float,
    shared: SharedRun | None = None,
) -> RunOutcome:
    """Write the output, judge the run on its rows, and finish its record (and earlier ones it settled).

    An output that cannot be written (its folder turned read-only, a directory in its place) does
    not change what the rows are: the run keeps the status they give it, and its record says the
    file was not written and how to write it."""
    unwritten: OutputError | None = None
    try:
        output, rows = write_output_and_count(plan, store, options.output_path)
    except OutputError as exc:
        output, rows, unwritten = None, row_counts(plan, store), exc
    status = derive_status(stop, rows)
    run.status, run.paused_reason = status, status_reason(status, stop, rows)
    if unwritten is not None:
        run.paused_reason = "; ".join(filter(None, [run.paused_reason, output_not_written(run.run_id, unwritten)]))
    run.requests, run.cached, run.skipped = progress.total, progress.cached, progress.skipped
    run.output_path = None if output is None else str(output)
    run.end_with(rows, failure_costs(store, plan.job_id))  # kept: later runs change the job's rows
    if shared is not None:
        shared.leave(run)  # the last worker to leave closes the run with every worker's answers
    else:
        run = stored_counts(store, run)
        store.finish_run(run)
        settle_earlier_runs(store, plan.job_id, run)
    outcome = RunOutcome(
        run_id=run.run_id,
        status=status,
        stop_reason=run.paused_reason,
        progress={**progress.snapshot(), "rows": rows},
        output_path=run.output_path,
        cost_usd=progress.cost_usd,
        duration_s=time.monotonic() - started,
        cached=progress.cached,
        skipped=progress.skipped,
        requests=progress.total,
        steps=run_step_report(store, run.run_id),
        output_error=unwritten,
    )
    options.emit(
        Event(
            "run_finished",
            {
                "run_id": run.run_id,
                "status": status,
                "output": run.output_path,
                "reason": run.paused_reason,
                "rows": rows,
                **progress.snapshot(),
            },
        )
    )
    return outcome


def kept_attached_if_small(plan: CompiledPlan, store: StateStore) -> AbstractContextManager[Any]:
    """A small job's DuckDB state stays attached across the whole apply (closing dead runs, the
    run's start, its scans, flushes and end), up to KEEP_ATTACHED_S at a time: one attach and
    checkpoint instead of eight (~40 ms of CPU an apply). Unlike `_held_if_small` it never holds
    the process's state lock between calls, so the flushes' worker threads use the file meanwhile;
    the file is detached when the block ends. Big jobs' units leave the file (and the host's
    memory) free between calls, and PostgreSQL connections are pooled anyway."""
    if isinstance(store, PostgresStore) or not is_small(plan):
        return nullcontext()
    return store.kept_attached(KEEP_ATTACHED_S)


def _held_if_small(plan: CompiledPlan, store: StateStore) -> AbstractContextManager[Any]:
    """The DuckDB state attached once for a small job's series of calls (alone, each attaches the
    file and checkpoints it as it detaches: ~4 ms of CPU); a big job's scan and export leave the
    file free for other processes between calls, and PostgreSQL connections are pooled anyway."""
    if isinstance(store, PostgresStore) or not is_small(plan):
        return nullcontext()
    return store.session()


def _new_run_id() -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    return f"r{stamp}-{uuid.uuid4().hex[:6]}"
