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
import signal
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from batchor.engine.batch import BatchExecutor, BatchOptions
from batchor.engine.batch_handover import realtime_after_batches
from batchor.engine.budget import CLI_SOURCE, Budget, effective_max_cost
from batchor.engine.events import Event, EventSink, Progress, ignore
from batchor.engine.limits import RunLimits
from batchor.engine.pipeline import Pipeline, PipelinedExecutor, PipelineSink, followers
from batchor.engine.realtime import RealtimeExecutor
from batchor.engine.sink import ResultSink
from batchor.engine.sql_run import run_sql_step
from batchor.engine.types import StepRuntime, StopSignal, WorkItem
from batchor.engine.work import StepWork
from batchor.engine.workers import SharedRun
from batchor.errors import CostLimitError, CostUnboundedError, NoPriceError, StalePlanError
from batchor.outputs.export import check_output_target, write_output
from batchor.plan.compile import check_input_unchanged
from batchor.plan.model import StepPlan
from batchor.plan.plan_file import CompiledPlan
from batchor.plan.prices import ModelPrice
from batchor.providers import create_provider
from batchor.providers.base import ProviderConfig
from batchor.state.base import RunRecord, RunStatus, StateStore
from batchor.state.postgres_store import PostgresStore


@dataclass
class ApplyOptions:
    max_cost: float | None = None
    max_cost_source: str = CLI_SOURCE  # where the budget comes from (see budget.effective_max_cost)
    refresh: frozenset[str] = frozenset()
    retry_failed: bool = False  # also send requests that failed for good earlier (deterministic errors)
    emit: EventSink = ignore
    output_path: Path | None = None
    handle_signals: bool = True
    seed: int | None = None
    limits: dict[str, Any] = field(default_factory=dict)  # overrides of the plan's limits
    wait: bool = True  # False: submit batch work and return (apply --no-wait)
    sleep: Any = None  # injected async sleep for batch polling (tests); None: real time


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


def check_budget(plan: CompiledPlan, max_cost: float | None) -> None:
    """Refuse before any call when the plan's upper bound passes the budget: the lower of
    --max-cost and the spec's `limits.max_cost_usd`."""
    max_cost, source = effective_max_cost(max_cost, plan.header.limits.get("max_cost_usd"))
    if max_cost is None:
        return
    totals = plan.header.totals
    if totals.unpriced_models:
        raise NoPriceError(
            f"no price known for {', '.join(totals.unpriced_models)}, so {source} cannot be enforced",
            hint="add `price: {input_per_mtok: ..., output_per_mtok: ...}` to the model block")
    if totals.unbounded:
        raise CostUnboundedError(
            f"step(s) {', '.join(totals.unbounded)} run once per element of a fan-out with no bound, so the plan "
            f"has no upper-bound cost and {source} cannot be enforced; nothing was sent",
            hint="set `max_fanout:` on the fan-out SQL step, or `maxItems` on the list it unnests "
                 "in the upstream step's schema", plan=plan)
    if totals.cost_upper > max_cost + 1e-12:
        raise CostLimitError(
            f"the plan may cost up to ${totals.cost_upper:.4f} (expected ${totals.cost_expected:.4f}), "
            f"above {source} {max_cost:g}; nothing was sent",
            hint=f"raise {source}, lower max_tokens, or add input.limit", plan=plan)


def apply_plan(plan: CompiledPlan, store: StateStore, options: ApplyOptions) -> RunOutcome:
    header = plan.header
    check_budget(plan, options.max_cost)
    check_output_target(plan, options.output_path)
    reason = check_input_unchanged(header)
    if reason:
        raise StalePlanError(f"plan {header.plan_id} is stale: {reason}", hint="re-plan with `batchor plan SPEC`")
    limits = RunLimits.merged(header.limits, options.limits)
    if header.mocked:
        limits = limits.without_rate_limits()
    max_cost, source = effective_max_cost(options.max_cost, limits.max_cost_usd)
    options = dataclasses.replace(options, max_cost=max_cost, max_cost_source=source or CLI_SOURCE)
    run = RunRecord(run_id=_new_run_id(), job_id=plan.job_id, plan_id=header.plan_id, name=header.name,
                    mocked=header.mocked, plan_path=str(plan.saved_path) if plan.saved_path else None)
    progress = Progress()
    # A shared (PostgreSQL) state: join the job's live run as one of its workers, or start it.
    shared = (SharedRun.join(store, run, progress, limits, options.emit, options.max_cost,
                             options.max_cost_source)
              if isinstance(store, PostgresStore) else None)
    if shared is None:
        store.start_run(run)
    options.emit(Event("run_started", {"run_id": run.run_id, "plan_id": header.plan_id, "name": header.name}))
    started = time.monotonic()
    runner = _Runner(plan, store, options, run, progress, limits, shared)
    try:
        stop = _off_running_loop(runner.run, runner.stop)
    except BaseException:
        if shared is not None:
            shared.abandon()
        raise
    return _finish(plan, store, options, run, progress, stop, started, shared)


def _off_running_loop(fn: Any, stop: StopSignal) -> StopSignal:
    """Run `fn` here, or on a worker thread when this thread already runs an event loop (Jupyter).

    There, KeyboardInterrupt reaches this thread: it stops the run gracefully instead of killing it.
    """
    if not _loop_running():
        return fn()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="batchor-apply", daemon=True)
    thread.start()
    while thread.is_alive():
        try:
            thread.join(0.2)
        except KeyboardInterrupt:
            stop.stop("interrupted", "stopped by KeyboardInterrupt")
    if "error" in box:
        raise box["error"]
    return box["value"]


class _Runner:
    """Runs the waves of one plan; owns providers and signal handling for the run."""

    def __init__(self, plan: CompiledPlan, store: StateStore, options: ApplyOptions, run: RunRecord,
                 progress: Progress, limits: RunLimits, shared: SharedRun | None = None) -> None:
        self.plan, self.store, self.options, self.run_record = plan, store, options, run
        self.shared = shared
        self.progress, self.limits = progress, limits
        self.budget = shared.budget if shared is not None else Budget(options.max_cost, source=options.max_cost_source)
        self.stop = StopSignal()
        self.runtimes: dict[str, StepRuntime] = {}
        self.in_flight = 0  # provider batches left running (apply --no-wait)
        self._pipeline: Pipeline | None = None  # the current wave's followers (see pipeline.py)
        self._feed: Pipeline | None = None  # ... until a realtime executor takes it
        self._user_emit = options.emit
        self._last_saved = time.monotonic()
        self.options = _with_emit(options, self._emit)

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
                asyncio.get_running_loop().run_in_executor(None, save)
            except RuntimeError:  # no event loop here
                save()

    def run(self) -> StopSignal:
        self._create_providers()
        # One event loop for every wave and the final close: SDK clients keep connections bound
        # to the loop that opened them, so closing them on a fresh loop fails.
        with asyncio.Runner() as runner:
            try:
                done: set[str] = set()
                for wave in self.plan.header.waves():
                    wave = [s for s in wave if s.name not in done]  # pipelined into an earlier wave
                    for step in (s for s in wave if s.provider == "sql"):
                        self._run_sql(step)
                    works = [self._scan(step) for step in wave if step.provider != "sql"]
                    done |= {s.name for s in wave}
                    self._pipeline = self._feed = self._start_pipeline(works, done)
                    if any(w.pending for w in works):
                        runner.run(self._execute_wave(works))
                    if self._pipeline is not None and self._pipeline.complete:
                        done |= set(self._pipeline.followers)
                    if self.in_flight:  # --no-wait: later waves need these answers first
                        self.stop.stop("in_flight", f"{self.in_flight} provider batch(es) in flight")
                    if self.stop.stopped:
                        break
            finally:
                runner.run(self._close_providers())
        return self.stop

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
        pipeline = Pipeline(self.plan, self.store, works, steps, refresh=self.options.refresh,
                            progress=self.progress, stop=self.stop,
                            retry_failed=self.options.retry_failed or self.plan.header.retry_failed)
        for step in steps:
            self.options.emit(Event("step_started", {"step": step.name, "pipelined": True}))
        return pipeline

    def _scan(self, step: StepPlan) -> StepWork:
        refresh = step.name in self.options.refresh or "*" in self.options.refresh
        retry_failed = self.options.retry_failed or self.plan.header.retry_failed
        work = StepWork(self.plan, step, self.store, refresh=refresh, retry_failed=retry_failed)
        work.scan()
        planned = step.counts.to_run + step.counts.too_long + (step.counts.failed_earlier if retry_failed else 0)
        if not step.depends_on and not refresh and len(work.pending) > planned:
            gone = len(work.pending) - planned
            raise StalePlanError(
                f"plan {self.plan.plan_id} is stale: {gone} answer(s) it counted as cached for step "
                f"'{step.name}' are no longer in the state", hint="re-plan with `batchor plan SPEC`")
        p = self.progress
        p.total += len(work.pending)
        p.cached += work.cached
        p.skipped += work.skipped
        self.options.emit(Event("step_started", {"step": step.name, "pending": len(work.pending),
                                                 "cached": work.cached, "skipped": work.skipped}))
        return work

    def _run_sql(self, step: StepPlan) -> None:
        answered, left_out = run_sql_step(self.plan, step, self.store, self.run_record.run_id)
        self.progress.skipped += left_out
        self.options.emit(Event("step_finished", {"step": step.name, "kind": "sql", "rows": answered,
                                                  "left_out": left_out}))

    def _create_providers(self) -> None:
        """Build clients for steps with work; a missing key fails here, before any call."""
        for step in self.plan.header.steps:
            if step.provider == "sql":
                continue
            if step.counts.to_run == 0 and not step.counts.estimated and not self.options.refresh:
                continue
            config = ProviderConfig(provider=step.provider, base_url=step.base_url, api_key_env=step.api_key_env,
                                    timeout_s=self.limits.request_timeout_s,
                                    options={**step.provider_options, "api": step.api or "chat",
                                             "strict": step.strict})
            price = ModelPrice.from_dict(step.price) if step.price else None
            self.runtimes[step.name] = StepRuntime(step, create_provider(config), price)

    async def _execute_wave(self, works: list[StepWork]) -> None:
        """Realtime steps and batch steps of one wave side by side, under one signal handler."""
        if self.shared is not None:  # several workers: run only the slices this one claims
            with _signals(self.stop, self.options.handle_signals):
                await self.shared.run_wave(works, self._execute, self._execute_batches, self.stop)
            return
        batch = [w for w in works if w.step.mode == "batch" and w.pending]
        realtime = [w for w in works if w.step.mode != "batch" and w.pending]
        jobs = [realtime_after_batches(realtime, self.store, self._execute, self._execute_batches)] if realtime else []
        if batch:
            jobs.append(self._execute_batches(batch))
        with _signals(self.stop, self.options.handle_signals):
            await asyncio.gather(*jobs)

    async def _execute(self, items: Iterator[WorkItem]) -> None:
        # Shared state: each answer is committed before its slot sends again, so a worker that
        # dies loses at most its in-flight requests (others take over the rest of its claims).
        feed, self._feed = self._feed, None  # a wave's pipeline feeds its first realtime run only
        sink_args = (self.store, self.run_record.run_id)
        sink_options: dict[str, Any] = {"keep_raw": self.plan.header.keep_raw,
                                        **({"flush_rows": 1} if self.shared is not None else {})}
        sink = PipelineSink(feed, *sink_args, **sink_options) if feed else ResultSink(*sink_args, **sink_options)
        options: dict[str, Any] = {"limits": self.limits, "budget": self.budget, "sink": sink,
                                   "progress": self.progress, "emit": self.options.emit, "stop": self.stop,
                                   "seed": self.options.seed}
        executor = (PipelinedExecutor(feed, self.runtimes, **options) if feed
                    else RealtimeExecutor(self.runtimes, **options))
        if self.shared is not None:
            executor.limiter = self.shared.limiter(executor.limiter, self.runtimes)
        await executor.run(items)
        if feed:
            await feed.finish()

    async def _execute_batches(self, works: list[StepWork]) -> None:
        sink = ResultSink(self.store, self.run_record.run_id, keep_raw=self.plan.header.keep_raw,
                          flush_rows=1 << 30, flush_interval_s=1e9)  # flushed once per collected batch
        executor = BatchExecutor(self.runtimes, store=self.store, run_id=self.run_record.run_id,
                                 job_id=self.plan.job_id, limits=self.limits, budget=self.budget, sink=sink,
                                 progress=self.progress, emit=self.options.emit, stop=self.stop,
                                 options=BatchOptions(wait=self.options.wait, sleep=self.options.sleep))
        self.in_flight += await executor.run(works)

    async def _close_providers(self) -> None:
        for runtime in self.runtimes.values():
            await runtime.provider.aclose()


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _with_emit(options: ApplyOptions, emit: EventSink) -> ApplyOptions:
    from dataclasses import replace

    return replace(options, emit=emit)


class _signals:
    """First Ctrl+C/SIGTERM: stop sending, let in-flight calls finish. Second: cancel them."""

    def __init__(self, stop: StopSignal, enabled: bool) -> None:
        self.stop, self.enabled = stop, enabled and threading.current_thread() is threading.main_thread()
        self.count = 0

    def __enter__(self) -> "_signals":
        if self.enabled:
            self.loop = asyncio.get_running_loop()
            self.task = asyncio.current_task()
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.loop.add_signal_handler(sig, self._on_signal)
        return self

    def _on_signal(self) -> None:
        self.count += 1
        self.stop.stop("interrupted", "stopped by signal")
        if self.count >= 2 and self.task is not None:
            self.task.cancel()

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.loop.remove_signal_handler(sig)


def _finish(plan: CompiledPlan, store: StateStore, options: ApplyOptions, run: RunRecord, progress: Progress,
            stop: StopSignal, started: float, shared: SharedRun | None = None) -> RunOutcome:
    status = _status(progress, stop)
    output = write_output(plan, store, options.output_path)
    run.status, run.paused_reason = status, stop.detail if stop.reason not in (None, "interrupted") else None
    run.requests, run.succeeded, run.failed = progress.total, progress.succeeded, progress.failed
    run.cached, run.skipped, run.cost_usd = progress.cached, progress.skipped, progress.cost_usd
    run.input_tokens, run.output_tokens, run.output_path = progress.input_tokens, progress.output_tokens, str(output)
    if shared is not None:
        shared.leave(run)  # the last worker to leave closes the run with every worker's answers
    else:
        store.finish_run(run)
    outcome = RunOutcome(run_id=run.run_id, status=status, stop_reason=stop.detail, progress=progress.snapshot(),
                         output_path=str(output), cost_usd=progress.cost_usd,
                         duration_s=time.monotonic() - started, cached=progress.cached, skipped=progress.skipped,
                         requests=progress.total)
    options.emit(Event("run_finished", {"run_id": run.run_id, "status": status, "output": str(output),
                                        "reason": stop.detail, **progress.snapshot()}))
    return outcome


def _status(progress: Progress, stop: StopSignal) -> RunStatus:
    if stop.reason == "in_flight":
        return "in_flight"
    if stop.reason == "interrupted":
        return "interrupted"
    if stop.reason == "quota":
        return "paused"
    if stop.reason == "budget":
        return "budget"
    if stop.reason in ("unknown_model", "auth_failed"):
        return "failed"
    if progress.failed:
        return "partial" if progress.succeeded or progress.cached else "failed"
    return "succeeded"


def _new_run_id() -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    return f"r{stamp}-{uuid.uuid4().hex[:6]}"

