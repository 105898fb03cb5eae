"""Validate and plan: a spec (a path, a YAML string or a dict) checked, or compiled into a priced
plan saved under the state's `plans/` folder. `data` (a DataFrame, an Arrow table or a path)
replaces the spec's input; `limit`, `sample`, `model`, `mock` make a partial run (plan/variants.py).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from batchor.errors import NoApiKeyError, UsageError, disk_full_reported
from batchor.frames import frame_kind, materialize
from batchor.plan.compile import compile_plan
from batchor.plan.keys import KeyNeed, needed_keys
from batchor.plan.plan_file import CompiledPlan
from batchor.plan.steps import Overrides
from batchor.plan.targets import check_output_path
from batchor.plan.trust import seal
from batchor.plan.validate import ValidationReport, validate_loaded
from batchor.plan.variants import changes_the_model, changes_the_provider, variant_tags
from batchor.quality import bind_spec_checks, check_plan
from batchor.resolve import paired
from batchor.spec.inputs import rows_only_sql
from batchor.spec.load import LoadedSpec, load_spec
from batchor.state import find_state, open_state

SpecLike = str | Path | dict[str, Any]


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
