"""Apply: plan (unless given a plan or a plan file), check, and execute under the state's lock;
the run's outcome becomes a `Result` with its quality gates checked. A pilot first when asked
(batchor/pilot/).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from batchor.api.planning import SpecLike, check_arguments
from batchor.api.saved_plans import load_or_plan
from batchor.engine.events import Event, logged
from batchor.engine.run import ApplyOptions, RunOutcome, apply_plan, check_budget, kept_attached_if_small
from batchor.errors import StalePlanError, disk_full_reported
from batchor.frames import frame_kind
from batchor.outputs.export import output_columns
from batchor.plan.endpoint import check_endpoints
from batchor.plan.plan_file import CompiledPlan
from batchor.quality import check_plan, checks_after_run
from batchor.resolve import write_clusters
from batchor.result import Result
from batchor.state import apply_lock, is_postgres, open_state, state_location
from batchor.state.runs import close_dead_runs


def apply(
    spec_or_plan: SpecLike | CompiledPlan,
    data: Any = None,
    *,
    max_cost: float | None = None,
    state: str | None = None,
    model: str | None = None,
    mock: bool = False,
    mode: str | None = None,
    refresh: frozenset[str] | set[str] = frozenset(),
    no_cache: bool = False,
    limit: int | None = None,
    sample: int | None = None,
    output: str | Path | None = None,
    on_event: Callable[[Event], None] | None = None,
    handle_signals: bool = True,
    limits: dict[str, Any] | None = None,
    wait: bool = True,
    retry_failed: bool = False,
    progress: bool = True,
    pilot: int | str | None = None,
    pilot_seed: int | None = None,
    pilot_target: float | None = None,
    trust_plan: bool = False,
    force: bool = False,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> Result:
    """Plan (unless given a plan or plan file) and execute it. Rows that fail do not raise:
    check `result.failed` and `result.errors()`. Ctrl+C stops gracefully; call again to resume.
    `no_cache=True` asks every request again, like `refresh` naming every step. `progress` shows
    the live view in a notebook or on a terminal (never into a pipe or a file); False turns it off.
    `pilot=50` (or `"auto"`) runs a seeded sample of rows first, then the rest planned from their
    answers within what the pilot left of `max_cost`, as `apply --pilot` does: `result.pilot` holds
    the pilot; a pilot that stopped returns its own run's result (call again to resume).
    A saved plan file another state made needs `trust_plan=True` (see plan/trust.py); `force` lets
    the spec's output replace a file batchor did not write (outputs/written.py).
    `on_row` is called with each output row (a dict, as the JSONL output has it) once it is
    finished and stored, rows already answered in the state (cached) included, first (see
    docs/guides/streaming.md)."""
    refresh = frozenset(refresh) | ({"*"} if no_cache else set())
    if pilot is not None:
        from batchor.pilot import apply_with_pilot

        return apply_with_pilot(
            spec_or_plan,
            data,
            pilot,
            seed=pilot_seed,
            target=pilot_target,
            options={"state": state, "model": model, "mock": mock, "mode": mode, "max_cost": max_cost},
            rest={
                "refresh": refresh,
                "output": output,
                "on_event": on_event,
                "handle_signals": handle_signals,
                "limits": limits,
                "wait": wait,
                "retry_failed": retry_failed,
            },
            limited=(limit, sample),
        )
    compiled = load_or_plan(
        spec_or_plan,
        trust_plan=trust_plan,
        data=data,
        state=state,
        model=model,
        mock=mock,
        mode=mode,
        refresh=refresh,
        limit=limit,
        sample=sample,
        retry_failed=retry_failed,
    )
    view = _live_view(compiled, max_cost) if progress else None
    try:
        outcome = apply_compiled(
            compiled,
            max_cost=max_cost,
            state=state,
            refresh=refresh,
            output=output,
            on_event=_both(view, on_event),
            handle_signals=handle_signals,
            limits=limits,
            wait=wait,
            retry_failed=retry_failed,
            force=force,
            on_row=on_row,
        )
    finally:
        if view is not None:
            view.close()
    if data is None:
        data = getattr(compiled, "source_data", None)
    kind = frame_kind(data) if data is not None else "path"
    result = to_result(outcome, compiled, kind, data if kind in ("pandas", "polars", "arrow") else None)
    result.checks = checks_after_run(compiled, outcome.run_id, outcome.status, state)  # quality gates, no calls
    return result


def _live_view(compiled: CompiledPlan, max_cost: float | None) -> Any:
    """The live table on a terminal or in a notebook, else None. Imported here: rich and the
    report package cost start-up time the CLI (which renders events its own way) never uses."""
    from batchor.report.live import LiveView, wanted

    return LiveView(compiled, max_cost) if wanted() else None


def _both(
    view: Callable[[Event], None] | None, on_event: Callable[[Event], None] | None
) -> Callable[[Event], None] | None:
    """The live view and the caller's callback, each given every event."""
    if view is None or on_event is None:
        return view or on_event

    def both(event: Event) -> None:
        view(event)
        on_event(event)

    return both


def to_result(outcome: RunOutcome, compiled: CompiledPlan, kind: str = "path", original: Any = None) -> Result:
    p = outcome.progress
    return Result(
        run_id=outcome.run_id,
        status=outcome.status,
        succeeded=p["succeeded"],
        failed=p["failed"],
        cached=outcome.cached,
        skipped=outcome.skipped,
        input_tokens=p["input_tokens"],
        output_tokens=p["output_tokens"],
        cost_usd=outcome.cost_usd,
        duration_s=outcome.duration_s,
        output_path=outcome.output_path,
        stop_reason=outcome.stop_reason,
        wasted_usd=p.get("wasted_usd", 0.0),
        estimated_usd=p.get("estimated_usd", 0.0),
        steps=outcome.steps,
        rows=dict(p.get("rows") or {}),
        answer_columns=output_columns(compiled.header.steps) + ["_row_key", "_status", "_error"],
        _kind=kind,
        _original=original,
    )


def apply_compiled(
    compiled: CompiledPlan,
    *,
    max_cost: float | None = None,
    state: str | None = None,
    refresh: frozenset[str] | set[str] = frozenset(),
    output: str | Path | None = None,
    on_event: Callable[[Event], None] | None = None,
    handle_signals: bool = True,
    limits: dict[str, Any] | None = None,
    wait: bool = True,
    retry_failed: bool = False,
    run_kind: str = "apply",
    max_calls: int | None = None,
    force: bool = False,
    on_row: Callable[[dict[str, Any]], None] | None = None,
    row_events: bool = False,
) -> RunOutcome:
    """Execute a compiled plan; `run_kind` "pilot" marks its answers as a pilot's (plan/estimate.py);
    `max_calls` holds it to that many attempts, re-asks included (a pilot's allowance).
    `row_events` emits a `row_finished` event per finished row; `on_row` receives each such row."""
    check_arguments(max_cost=max_cost)
    check_budget(compiled, max_cost)
    check_endpoints(compiled.header.steps)
    check_plan(compiled)  # checks and golden labels bind to the plan's columns before any call
    location = state_location(state, compiled.header.state_location)
    _check_state_present(compiled, location)
    with disk_full_reported(location), apply_lock(location):
        store = open_state(location)
        replay = frozenset(refresh) | frozenset(compiled.header.refresh)  # a saved --refresh/--no-cache plan
        options = ApplyOptions(
            max_cost=max_cost,
            refresh=replay,
            emit=logged(_with_rows(on_event, on_row)),
            output_path=Path(output) if output else None,
            handle_signals=handle_signals,
            limits=limits or {},
            wait=wait,
            retry_failed=retry_failed,
            run_kind=run_kind,
            max_calls=max_calls,
            force=force,
            row_events=row_events or on_row is not None,
        )
        with kept_attached_if_small(compiled, store):
            if not getattr(store, "shared", False):  # this apply holds the state: a `running` run is dead
                close_dead_runs(store)
            try:
                outcome = apply_plan(compiled, store, options)
            except StalePlanError as exc:
                raise _naming_states(exc, compiled, location) from None
    if compiled.header.spec.get("resolve") and outcome.output_path:  # the rows' clusters, beside the pairs
        write_clusters(compiled.header, Path(outcome.output_path))
    return outcome


def _with_rows(
    on_event: Callable[[Event], None] | None, on_row: Callable[[dict[str, Any]], None] | None
) -> Callable[[Event], None] | None:
    """`on_event`, and each `row_finished` event's row handed to `on_row`."""
    if on_row is None:
        return on_event

    def both(event: Event) -> None:
        if event.type == "row_finished":
            on_row(event.data["row"])
        if on_event is not None:
            on_event(event)

    return both


def _check_state_present(compiled: CompiledPlan, location: str) -> None:
    """A plan that counted cached answers in a state file that is gone is stale (say so, not 'N answers gone')."""
    cached, planned_with = compiled.header.totals.cached, compiled.header.state_location
    if cached and not is_postgres(location) and not Path(location).exists():
        raise StalePlanError(
            f"plan {compiled.plan_id} counted {cached:,} cached answer(s) in state {planned_with}, but the state "
            f"{location} does not exist",
            hint="re-plan with `batchor plan SPEC`, or pass --state with the state the plan was made with",
        )


def _naming_states(exc: StalePlanError, compiled: CompiledPlan, location: str) -> StalePlanError:
    planned_with = compiled.header.state_location
    if not planned_with or planned_with == location:
        return exc
    return StalePlanError(
        f"{exc.message} (the plan was made with state {planned_with}; this apply uses {location})", hint=exc.hint
    )
