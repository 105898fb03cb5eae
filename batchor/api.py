"""The Python API, and what the CLI calls: validate, plan, apply.

Everything a user can do goes through here, so the CLI stays a thin layer of parsing and printing.
`spec` is a path, a YAML string or a dict; `data` (a pandas/polars DataFrame, an Arrow table or a
path) replaces the spec's input.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable

from batchor.engine.events import Event, logged
from batchor.engine.run import ApplyOptions, RunOutcome, apply_plan, check_budget, kept_attached_if_small
from batchor.errors import BatchorError, NoApiKeyError, StalePlanError, UsageError, disk_full_reported
from batchor.frames import frame_kind, materialize
from batchor.outputs.export import output_columns
from batchor.plan.budget import SPEC_SOURCE as SPEC_SOURCE  # how the CLI says which budget to raise
from batchor.plan.budget import raise_hint as raise_hint
from batchor.plan.compile import compile_plan
from batchor.plan.endpoint import check_endpoints
from batchor.plan.keys import KeyNeed, needed_keys
from batchor.plan.plan_file import CompiledPlan, load_plan
from batchor.plan.steps import Overrides
from batchor.plan.summary import causes_text as causes_text  # the printed forms of a plan, for the CLI
from batchor.plan.summary import money as money
from batchor.plan.summary import plan_dict as plan_dict
from batchor.plan.summary import plan_markdown as plan_markdown
from batchor.plan.summary import plan_text as plan_text
from batchor.plan.summary import shared_rows as shared_rows
from batchor.plan.targets import check_output_path
from batchor.plan.trust import check_trusted, repository_spec, seal, sealed_here
from batchor.plan.validate import ValidationReport, validate_loaded
from batchor.plan.variants import changes_the_model, changes_the_provider, variant_tags
from batchor.quality import bind_spec_checks, check_plan, checks_after_run
from batchor.resolve import paired, write_clusters
from batchor.result import Result
from batchor.spec.inputs import rows_only_sql
from batchor.spec.load import LoadedSpec, load_spec
from batchor.state import apply_lock, find_state, is_postgres, open_state, state_location
from batchor.state.runs import close_dead_runs

SpecLike = str | Path | dict[str, Any]
Plan = CompiledPlan


def validate(spec: SpecLike, *, model: str | None = None, mock: bool = False) -> ValidationReport:
    """Check a spec without network or keys: spec, templates, columns, schemas, prices.

    Raises the problem found, or `SpecProblemsError` (its `.problems`) when there are several."""
    return validate_loaded(load_spec(spec), Overrides(model=model, mock=mock), bind_spec_checks)


def required_keys(specs: list[SpecLike], *, environ: Mapping[str, str] | None = None) -> list[KeyNeed]:
    """The API keys the specs' steps need and whether each is set (in `environ`, default the
    process environment), without network, input rows or reading a key's value.

    `missing_keys` of the answer raises `NoApiKeyError` naming every one that is not set."""
    env = os.environ if environ is None else environ
    return [need for spec in specs for need in needed_keys(load_spec(spec), env)]


def missing_keys(needs: list[KeyNeed]) -> None:
    """Raise `NoApiKeyError` naming each missing key variable and the specs that need it."""
    missing = [need for need in needs if not need.present]
    if missing:
        lines = [f"{' or '.join(n.envs)} ({n.provider}, for {n.spec}: {', '.join(n.steps)})" for n in missing]
        raise NoApiKeyError(
            f"{len(missing)} API key(s) not set: " + "; ".join(lines),
            hint="set them (in CI: pass each as a secret to the step's env), or rehearse offline with --mock",
        )


def plan(
    spec: SpecLike,
    data: Any = None,
    *,
    state: str | None = None,
    model: str | None = None,
    mock: bool = False,
    mode: str | None = None,
    refresh: frozenset[str] | set[str] = frozenset(),
    no_cache: bool = False,
    limit: int | None = None,
    sample: int | None = None,
    seed: int | None = None,
    save: bool | str | Path = True,
    retry_failed: bool = False,
    pilot: int | None = None,
    row_keys: list[str] | None = None,
    base_dir: str | Path | None = None,
) -> CompiledPlan:
    """Compile a spec into a priced plan; saved under .batchor/plans/ unless `save=False`.
    `retry_failed` plans requests that failed for good earlier (deterministic errors) again.
    `row_keys` keeps the input to those rows (a pilot's top-up drawn where a `when:` holds).
    `base_dir`: where a spec given as text resolves its relative paths (default: the working folder).
    With `limit`, `sample`, `model`, `mock` or `data` the run is partial: its output file is written
    beside the spec's (`out.limit-100.csv`, ...), never over it (plan/variants.py)."""
    check_arguments(mode=mode, limit=limit, sample=sample, pilot=pilot)
    loaded = load_spec(spec, base_dir=Path(base_dir) if base_dir is not None else None)
    variant = variant_tags(
        pilot=pilot,
        limit=limit,
        sample=sample,
        data=data is not None,
        model=model if changes_the_model(loaded.spec, model) else None,
        mock=changes_the_provider(loaded.spec, mock),
    )
    sample = pilot or sample  # a pilot is a seeded sample that writes beside the spec's output
    found = find_state(state, loaded.spec.state, loaded.base_dir)
    location = found.location
    sql = None if row_keys is None else rows_only_sql(loaded.spec.input.sql, loaded.spec.input.key_columns(), row_keys)
    loaded = _with_input(loaded, data, location, limit=limit, sample=sample, seed=seed, sql=sql)
    if loaded.spec.resolve is not None:  # the step judges the rows' candidate pairs (batchor/resolve/)
        loaded = paired(loaded, _state_dir(location) / "inputs")
    refresh = frozenset(refresh) | ({"*"} if no_cache else set())
    with disk_full_reported(location):
        store = open_state(location)
        compiled = compile_plan(
            loaded,
            overrides=Overrides(model=model, mock=mock, mode=mode),
            state=store,
            refresh=refresh,
            state_location=location,
            retry_failed=retry_failed,
            variant=variant,
            state_source=found.source,
        )
        check_plan(compiled)  # a check naming a missing field fails here, as in validate, not at apply
        check_output_path(
            compiled.header.output.path,
            state_location=location,
            inputs=compiled.header.input.files,
            spec=_spec_file(spec),
        )
        compiled.source_data = data  # apply(plan) returns results in the type of this input
        compiled.header = compiled.header.model_copy(update={"seal": seal(compiled.plan_id, location)})
        if save:
            target = Path(save) if isinstance(save, (str, Path)) else plans_dir(location) / f"{compiled.plan_id}.plan"
            compiled.save(target)
    return compiled


def _spec_file(spec: SpecLike) -> str | None:
    """The spec's file, when it was given as one (an output must not overwrite it)."""
    return str(spec) if isinstance(spec, Path) or (isinstance(spec, str) and "\n" not in spec) else None


MODES = ("realtime", "batch", "auto")


def check_arguments(
    *,
    mode: str | None = None,
    max_cost: float | None = None,
    limit: int | None = None,
    sample: int | None = None,
    pilot: int | None = None,
) -> None:
    """Refuse argument values no command could mean (the CLI's parser already stops most of them)."""
    if mode is not None and mode not in MODES:
        raise UsageError(f"mode '{mode}' is not one of {', '.join(MODES)}", hint="pass --mode realtime, batch or auto")
    if max_cost is not None and not max_cost >= 0:  # also refuses NaN
        raise UsageError(f"max_cost {max_cost} must be a number >= 0", hint="give the budget in USD, e.g. --max-cost 5")
    for name, value in (("limit", limit), ("sample", sample), ("pilot", pilot)):
        if value is not None and value < 1:
            raise UsageError(f"{name} {value} must be at least 1", hint=f"give --{name} N with N >= 1")
    if pilot is not None and (limit is not None or sample is not None):
        raise UsageError(
            "--pilot draws its own seeded sample: it does not combine with --limit or --sample",
            hint="drop --limit/--sample (choose the pilot's rows with --pilot N and --pilot-seed S)",
        )


def _with_input(loaded: LoadedSpec, data: Any, location: str, **changes: Any) -> LoadedSpec:
    """Replace the spec's input by `data` and apply --limit/--sample overrides."""
    updates = {k: v for k, v in changes.items() if v is not None}
    if data is not None:
        if frame_kind(data) == "path":
            path = Path(data).resolve()
        else:
            path = materialize(data, _state_dir(location) / "inputs").resolve()
        updates.update(path=str(path), format=None if frame_kind(data) == "path" else "parquet")
    if not updates:
        return loaded
    new_input = loaded.spec.input.model_copy(update=updates)
    return dataclasses.replace(loaded, spec=loaded.spec.model_copy(update={"input": new_input}))


def _state_dir(location: str) -> Path:
    return Path(".batchor") if "://" in location else Path(location).parent


def plans_dir(location: str) -> Path:
    return _state_dir(location) / "plans"


def is_plan_file(path: str | Path) -> bool:
    p = Path(path)
    if p.suffix == ".plan":
        return True
    try:
        with open(p, "rb") as handle:
            return handle.read(2) == b"PK"
    except OSError:
        return False


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


def load_or_plan(spec_or_plan: SpecLike | CompiledPlan, *, trust_plan: bool = False, **plan_args: Any) -> CompiledPlan:
    """The plan to run: given, planned from a spec, or a saved plan file. A plan file this state
    did not seal is refused with its powers listed unless `trust_plan` (plan/trust.py)."""
    if isinstance(spec_or_plan, CompiledPlan):
        return spec_or_plan
    if isinstance(spec_or_plan, (str, Path)) and "\n" not in str(spec_or_plan) and is_plan_file(spec_or_plan):
        loaded = load_plan(Path(spec_or_plan))
        location = state_location(plan_args.get("state"), loaded.header.state_location)
        spec = (
            None if trust_plan or sealed_here(loaded.header, location) else _spec_plan(loaded, plan_args.get("state"))
        )
        check_trusted(loaded.header, location, trust_plan, spec)
        return loaded
    return plan(spec_or_plan, **plan_args)


def _spec_plan(saved: CompiledPlan, state: str | None) -> Any:
    """The header of the plan the repository's copy of the spec `saved` names compiles to now (not
    saved; mocked, limited or sampled as `saved` was), to compare powers with; None without one."""
    path = repository_spec(saved.header, Path.cwd())
    if path is None:
        return None
    tags, info = saved.header.output.variant, saved.header.input
    limit = info.limit if any(t.startswith("limit-") for t in tags) else None
    sample = info.sample if any(t.startswith("sample-") for t in tags) else None
    try:
        again = plan(
            path, state=state, mock=saved.header.mocked, limit=limit, sample=sample, seed=info.seed, save=False
        )
    except BatchorError:
        return None  # the spec does not plan here: the saved plan is judged on its own
    return again.header


def ensure_unlocked(state: str | None = None, target: str | Path | None = None) -> None:
    """Refuse at once (before planning) when another apply holds the state of spec `target`.
    A saved plan is not planned again: its apply takes the lock before anything else."""
    if target is not None and is_plan_file(target):
        return
    if target is None:
        location = state_location(state)
    else:
        loaded = load_spec(target)
        location = state_location(state, loaded.spec.state, loaded.base_dir)
    if "://" not in location and Path(location + ".lock").exists():
        with apply_lock(location):
            pass


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


__all__ = [
    "Plan",
    "Result",
    "ValidationReport",
    "apply",
    "apply_compiled",
    "is_plan_file",
    "load_or_plan",
    "plan",
    "validate",
]
