"""The end of an apply: write the output, judge the run on its rows, finish its record.

The run's status comes from why it stopped and what its rows are (engine/outcome.py); the outcome
handed back to the caller sets the plan's estimate beside what each step spent.
"""

from __future__ import annotations

import time

from batchor.engine.events import Event, Progress
from batchor.engine.outcome import derive_status, output_not_written, settle_earlier_runs, status_reason, stored_counts
from batchor.engine.run_types import ApplyOptions, RunOutcome
from batchor.engine.types import StopSignal
from batchor.engine.workers import SharedRun
from batchor.errors import OutputError
from batchor.outputs.export import row_counts, write_output_and_count
from batchor.plan.plan_file import CompiledPlan
from batchor.state.answer_stats import run_step_report
from batchor.state.base import RunRecord, StateStore
from batchor.state.spend import failure_costs


def finish_run(
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
