"""The Python API, and what the CLI calls: validate, plan, apply.

Everything a user can do goes through here, so the CLI stays a thin layer of parsing and printing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from batchor.engine.events import Event
from batchor.engine.run import ApplyOptions, RunOutcome, apply_plan, check_budget
from batchor.plan.compile import compile_plan
from batchor.plan.store import CompiledPlan, load_plan
from batchor.plan.steps import Overrides, resolve_steps
from batchor.spec.inputs import InputReader, resolve_input
from batchor.spec.load import LoadedSpec, load_spec
from batchor.spec.templates import check_columns
from batchor.state import apply_lock, open_state, state_location

SpecLike = str | Path | dict[str, Any]


@dataclass
class ValidationReport:
    spec: str
    steps: list[str]
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec, "ok": True, "steps": self.steps, "warnings": self.warnings}


def validate(spec: SpecLike, *, model: str | None = None, mock: bool = False) -> ValidationReport:
    """Check a spec without network or keys: spec, templates, columns, schemas, prices."""
    loaded = load_spec(spec)
    steps, templates = resolve_steps(loaded, Overrides(model=model, mock=mock))
    s = loaded.spec
    source = resolve_input(s.input.path, loaded.base_dir, s.input.format, s.input.sql, s.input.limit,
                           s.input.key_columns())
    reader = InputReader(source)
    try:
        for compiled in templates.values():
            check_columns(compiled, reader.columns)
    finally:
        reader.close()
    report = ValidationReport(spec=loaded.source, steps=[st.name for st in steps])
    for st in steps:
        report.warnings += [f"steps.{st.name}: {note}" for note in st.schema_notes]
        if st.price is None:
            report.warnings.append(f"steps.{st.name}: no price known for {st.provider}:{st.model}; "
                                   "--max-cost will refuse until the spec gives `price:`")
        if not st.token_count_exact and st.provider != "mock":
            report.warnings.append(f"steps.{st.name}: token counts for {st.provider} are estimates "
                                   f"(upper bound x{st.token_upper_factor:g})")
    return report


def plan(spec: SpecLike, *, state: str | None = None, model: str | None = None, mock: bool = False,
         mode: str | None = None, refresh: frozenset[str] | set[str] = frozenset(), no_cache: bool = False,
         save: bool | Path = True) -> CompiledPlan:
    """Compile a spec into a priced plan; saved under .batchor/plans/ unless `save=False`."""
    loaded = load_spec(spec)
    location = state_location(state, loaded.spec.state)
    refresh = frozenset(refresh) | ({"*"} if no_cache else set())
    store = open_state(location)
    compiled = compile_plan(loaded, overrides=Overrides(model=model, mock=mock, mode=mode), state=store,
                            refresh=refresh, state_location=location)
    if save:
        target = save if isinstance(save, Path) else plans_dir(location) / f"{compiled.plan_id}.plan"
        compiled.save(target)
    return compiled


def plans_dir(location: str) -> Path:
    if "://" in location:
        return Path(".batchor") / "plans"
    return Path(location).parent / "plans"


def is_plan_file(path: str | Path) -> bool:
    p = Path(path)
    if p.suffix == ".plan":
        return True
    try:
        with open(p, "rb") as handle:
            return handle.read(2) == b"PK"
    except OSError:
        return False


def apply(spec_or_plan: SpecLike | CompiledPlan, *, max_cost: float | None = None, state: str | None = None,
          model: str | None = None, mock: bool = False, mode: str | None = None,
          refresh: frozenset[str] | set[str] = frozenset(), output: str | Path | None = None,
          on_event: Callable[[Event], None] | None = None, handle_signals: bool = True,
          limits: dict[str, Any] | None = None) -> RunOutcome:
    """Plan (unless given a plan or plan file) and execute it; returns the run's outcome."""
    compiled = load_or_plan(spec_or_plan, state=state, model=model, mock=mock, mode=mode, refresh=refresh)
    return apply_compiled(compiled, max_cost=max_cost, state=state, refresh=refresh, output=output,
                          on_event=on_event, handle_signals=handle_signals, limits=limits)


def load_or_plan(spec_or_plan: SpecLike | CompiledPlan, **plan_args: Any) -> CompiledPlan:
    if isinstance(spec_or_plan, CompiledPlan):
        return spec_or_plan
    if isinstance(spec_or_plan, (str, Path)) and "\n" not in str(spec_or_plan) and is_plan_file(spec_or_plan):
        return load_plan(Path(spec_or_plan))
    return plan(spec_or_plan, **plan_args)


def apply_compiled(compiled: CompiledPlan, *, max_cost: float | None = None, state: str | None = None,
                   refresh: frozenset[str] | set[str] = frozenset(), output: str | Path | None = None,
                   on_event: Callable[[Event], None] | None = None, handle_signals: bool = True,
                   limits: dict[str, Any] | None = None) -> RunOutcome:
    check_budget(compiled, max_cost)
    location = state_location(state, compiled.header.state_location)
    with apply_lock(location):
        store = open_state(location)
        options = ApplyOptions(max_cost=max_cost, refresh=frozenset(refresh), emit=on_event or (lambda e: None),
                               output_path=Path(output) if output else None, handle_signals=handle_signals,
                               limits=limits or {})
        return apply_plan(compiled, store, options)


__all__ = ["ValidationReport", "apply", "apply_compiled", "is_plan_file", "load_or_plan", "plan", "validate",
           "LoadedSpec", "load_spec"]
