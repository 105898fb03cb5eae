"""Apply: execute exactly one compiled plan against the state, then write the output.

Order of checks before any call: budget (upper bound vs --max-cost, unpriced models), the plan
still matches its input and the cache, the provider keys exist (engine/preflight.py). Then steps
run wave by wave (engine/runner.py: a wave = steps whose inputs are ready), and realtime steps of
later waves start row by row as their inputs are stored (pipeline.py); every answer is stored as
it arrives. The run ends in engine/finish.py.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
import uuid
from pathlib import Path

from batchor.engine.budget import CLI_SOURCE, effective_max_cost
from batchor.engine.events import Event, Progress
from batchor.engine.finish import finish_run
from batchor.engine.held import held_if_small, kept_attached_if_small
from batchor.engine.interrupts import off_running_loop
from batchor.engine.limits import RunLimits
from batchor.engine.outcome import error_status, finish_after_error
from batchor.engine.preflight import check_before_run, check_budget
from batchor.engine.reduce_run import write_group_outputs
from batchor.engine.run_types import ApplyOptions, RunOutcome
from batchor.engine.runner import BATCH_THRESHOLD, WaveRunner
from batchor.engine.workers import SharedRun
from batchor.plan.estimate import step_estimates
from batchor.plan.plan_file import CompiledPlan
from batchor.state.answer_stats import record_run_steps
from batchor.state.base import RunRecord, StateStore
from batchor.state.postgres_store import PostgresStore

__all__ = [
    "BATCH_THRESHOLD",
    "ApplyOptions",
    "RunOutcome",
    "apply_plan",
    "check_budget",
    "kept_attached_if_small",
]


def apply_plan(plan: CompiledPlan, store: StateStore, options: ApplyOptions) -> RunOutcome:
    header = plan.header
    options = check_before_run(plan, store, options)
    limits = RunLimits.merged(header.limits, options.limits)
    if header.mocked:
        limits = limits.without_rate_limits()
    max_cost, source = effective_max_cost(options.max_cost, limits.max_cost_usd)
    options = dataclasses.replace(options, max_cost=max_cost, max_cost_source=source or CLI_SOURCE)
    options = dataclasses.replace(options, clock=options.clock or time.time)  # batch ages: injected or real
    run = RunRecord(
        run_id=_new_run_id(),
        job_id=plan.job_id,
        plan_id=header.plan_id,
        name=header.name,
        mocked=header.mocked,
        plan_path=str(plan.saved_path) if plan.saved_path else None,
    )
    progress = Progress()
    runner = WaveRunner(plan, store, options, run, progress, limits)
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
            with held_if_small(plan, store):
                outcome = finish_run(plan, store, options, run, progress, stop, started, runner.shared)
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


def _shared_budget(options: ApplyOptions) -> tuple[float | None, str]:
    """A shared run's budget row holds what is left for the job after its earlier runs."""
    left = None if options.max_cost is None else max(0.0, options.max_cost - options.carried)
    return left, options.max_cost_source


def _new_run_id() -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    return f"r{stamp}-{uuid.uuid4().hex[:6]}"
