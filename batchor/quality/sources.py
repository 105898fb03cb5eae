"""What `check` and `diff` read: a run, a saved plan or a spec, resolved to a plan and its state.

A run gives its plan file; a plan file is itself; a spec means its latest run in the state (the
newest run planned from that very file, so two prompt versions in two files stay apart, as do
`--sample` pilots of one file). The checks and golden labels come from the spec as it is now
when a spec is named (edit a check, re-check without a call), else from the plan's own copy.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pydantic import ValidationError

from batchor.errors import PlanFileError, RunNotFoundError
from batchor.plan.plan_file import HEADER_MEMBER, CompiledPlan, load_plan
from batchor.spec.load import load_spec
from batchor.spec.model import JobSpec
from batchor.state import open_existing_state
from batchor.state.base import RunRecord, StateStore

_RUNS_SEARCHED = 500


@dataclass
class Source:
    """One side of a diff, or the subject of a check."""

    label: str  # how the user named it
    plan: CompiledPlan
    store: StateStore
    run: RunRecord | None
    spec: JobSpec  # where `checks:` and `expected:` are read from
    added: pa.Table | None = None  # input columns the run's plan lacks (a label column added since), by row key


def resolve_source(target: str | Path | None, state: str | None = None) -> Source:
    """A run id (default: the latest run), a `.plan` file or a spec file."""
    text = str(target) if target is not None else None
    if text is not None and Path(text).suffix in (".yaml", ".yml") and Path(text).is_file():
        return _from_spec(Path(text), state)
    if text is not None and Path(text).is_file():
        plan = load_plan(Path(text))
        store = open_existing_state(state, plan.header.state_location)
        return Source(text, plan, store, _latest_run_of(store, plan.job_id), plan_spec(plan))
    store = open_existing_state(state)
    run = store.get_run(text)
    if run is None:
        raise RunNotFoundError(
            f"no run {text!r} in state {store.location}" if text else f"no runs yet in state {store.location}",
            hint="name a run id (see `batchor runs`), a saved .plan file or a spec file",
        )
    plan = _plan_of(run)
    return Source(text or run.run_id, plan, store, run, plan_spec(plan))


def _from_spec(path: Path, state: str | None) -> Source:
    loaded = load_spec(path)
    store = open_existing_state(state, loaded.spec.state, loaded.base_dir)
    wanted = path.resolve()
    for run in store.list_runs(_RUNS_SEARCHED):
        if run.name == loaded.spec.name and _planned_from(run.plan_path) == wanted:
            plan = _plan_of(run)
            return Source(str(path), plan, store, run, loaded.spec, added_columns(loaded, plan))
    raise RunNotFoundError(
        f"{path} has no run in state {store.location}",
        hint=f"apply it first, e.g. `batchor apply {path} --sample 50 --mock --yes`",
    )


def added_columns(loaded: Any, plan: CompiledPlan) -> pa.Table | None:
    """The input columns a golden label (`expected:`) names that the run's plan does not have (the
    column was added to the input after the run), read from the spec's input now with every other
    column it gained, keyed as the plan keyed its rows. None when the plan has them all."""
    from batchor.spec.inputs import InputReader, input_source, sql_ident, sql_str

    had = list(plan.header.input.columns)
    wanted = {c for s in loaded.spec.steps.values() for c in (getattr(s, "expected", None) or {}).values()}
    if wanted <= set(had):
        return None
    reader = InputReader(input_source(loaded))
    try:
        new = [c for c in reader.columns if c not in had]
        if not new or not set(had) <= set(reader.columns):
            return None  # a column the run read is gone: the rows are not the run's rows
        # a content key hashes the row as the run read it: the plan's columns only, in their order
        old_row = "{" + ", ".join(f"{sql_str(c)}: s.{sql_ident(c)}" for c in had) + "}"
        key = reader.key_expression() if reader.source.key_columns else f"md5(to_json({old_row}))"
        columns = ", ".join(f"s.{sql_ident(c)}" for c in new)
        return reader.table(f"SELECT {key} AS _row_key, {columns} FROM source s")
    finally:
        reader.close()


def _planned_from(plan_path: str | None) -> Path | None:
    """The spec file a saved plan was compiled from (read from its header only: cheap)."""
    if not plan_path or not Path(plan_path).is_file():
        return None
    try:
        with zipfile.ZipFile(plan_path) as archive:
            header = json.loads(archive.read(HEADER_MEMBER))
        return (Path(header["base_dir"]) / Path(header["spec_source"]).name).resolve()
    except (zipfile.BadZipFile, KeyError, OSError, ValueError):
        return None


def _plan_of(run: RunRecord) -> CompiledPlan:
    if not run.plan_path or not Path(run.plan_path).exists():
        raise PlanFileError(
            f"the plan of run {run.run_id} is not available ({run.plan_path})",
            hint="checks and diffs need the saved plan file the run was applied from",
        )
    return load_plan(Path(run.plan_path))


def _latest_run_of(store: StateStore, job_id: str) -> RunRecord | None:
    return next((r for r in store.list_runs(_RUNS_SEARCHED) if r.job_id == job_id), None)


def plan_spec(plan: CompiledPlan) -> JobSpec:
    try:
        return JobSpec.model_validate(plan.header.spec)
    except ValidationError as exc:
        raise PlanFileError(
            f"the spec inside plan {plan.plan_id} no longer validates ({exc.error_count()} problems)",
            hint="name the spec file instead, so its current checks are used",
        ) from None
