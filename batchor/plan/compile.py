"""Planning: spec + input + read-only state -> a frozen, priced `CompiledPlan`.

Rows stream from DuckDB as Arrow batches; each batch is rendered, keyed, token-counted (in one
batched tokenizer call) and checked against the result cache, then appended to the plan's
parquet data. Nothing holds the whole input in Python objects.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from batchor.errors import SpecError
from batchor.plan.changes import changes_by_cause, projected_changes, rendered_changes
from batchor.plan.dependent import (
    DependentTally,
    dependent_tallies,
    earlier_answers,
    first_row,
    projected_tokens,
)
from batchor.plan.estimate import with_estimates
from batchor.plan.model import (
    PlanHeader,
    StepPlan,
)
from batchor.plan.plan_file import CompiledPlan, file_sha256, job_id_for, plan_id_for
from batchor.plan.plan_header import check_input_unchanged, output_target, plan_header, streamed, with_variant
from batchor.plan.reduce_plan import reduce_tallies
from batchor.plan.render import write_plan_data
from batchor.plan.resolve_plan import resolve_tallies
from batchor.plan.step_counts import counted_steps, upstream_share, when_measure
from batchor.plan.step_kind import PER_GROUP
from batchor.plan.steps import Overrides, resolve_steps
from batchor.plan.typecheck import typed_steps
from batchor.spec.inputs import InputReader, input_source
from batchor.spec.load import LoadedSpec
from batchor.spec.templates import StepTemplates
from batchor.state.base import StateStore
from batchor.state.postgres_store import PostgresStore

__all__ = [
    "check_input_unchanged",
    "compile_plan",
    "output_target",
    "streamed",
    "upstream_share",
    "when_measure",
]


def compile_plan(
    loaded: LoadedSpec,
    *,
    overrides: Overrides = Overrides(),
    state: StateStore | None = None,
    refresh: frozenset[str] = frozenset(),
    state_location: str | None = None,
    retry_failed: bool = False,
    variant: tuple[str, ...] = (),
    state_source: str | None = None,
) -> CompiledPlan:
    """Compile a loaded spec against its input and the cache in `state` (None: nothing cached).
    Requests that failed for good earlier are not planned again unless `retry_failed`. A partial
    run (`variant`, see plan/variants.py) writes beside the spec's output."""
    spec = loaded.spec
    steps, templates = resolve_steps(loaded, overrides)
    unknown = refresh - set(spec.steps) - {"*"}
    if unknown:
        raise SpecError(f"--refresh names unknown step(s): {', '.join(sorted(unknown))}")
    source = input_source(loaded)
    reader = InputReader(source)
    with _state_held_if_small(state, reader):
        try:
            steps = with_estimates(
                typed_steps(loaded, steps, templates, reader.columns),
                state,
                spec.limits.max_attempts,
                spec.limits.on_truncation == "reask",
            )
            roots = [s for s in steps if not s.depends_on and not s.local and s.kind not in PER_GROUP]
            fd, tmp = tempfile.mkstemp(prefix="batchor-plan-", suffix=".parquet")
            os.close(fd)
            tallies: dict[str, Any] = write_plan_data(reader, Path(tmp), roots, templates, state, refresh, retry_failed)
            reduce_rows: dict[str, list[Any]] = {}
            cache = (refresh, retry_failed)
            dependents = _dependents(Path(tmp), steps, templates, state, cache, str(loaded.base_dir), reduce_rows)
            tallies.update(dependents)
            folders = (str(loaded.base_dir), spec.templates)
            tallies.update(reduce_tallies(steps, reduce_rows, state, cache, folders))
            tallies.update(resolve_tallies(steps, reduce_rows, state, cache, folders))
            columns, fingerprint = reader.columns, source.fingerprint()
        finally:
            reader.close()
        rows = pq.read_metadata(tmp).num_rows  # input rows (also when the first step is SQL)
        counted = counted_steps(steps, tallies, rows, spec.limits.batch_threshold)
        header = plan_header(loaded, counted, columns, fingerprint, source, rows, overrides, state_location)
        header = header.model_copy(update={"retry_failed": retry_failed, "state_source": state_source})
        header = header.model_copy(update={"refresh": sorted(refresh)})  # apply replays them (plan/store.py)
        header = with_variant(header, variant)
        header = _with_changes(header, Path(tmp), state, dependents)
        header = header.model_copy(update={"data_sha256": file_sha256(Path(tmp))})
        header = header.model_copy(update={"plan_id": plan_id_for(header)})
        return CompiledPlan(header, data_path=Path(tmp), cleanup=True)


def _state_held_if_small(state: StateStore | None, reader: InputReader) -> AbstractContextManager[Any]:
    """A small input's plan reads the DuckDB state about seven times (history for the estimates,
    cache, failures, changes): attached once for all of them instead of once each (~4 ms of CPU
    per attach and checkpoint). A big input's plan leaves the file free between its long reads, for
    other processes; PostgreSQL connections are pooled anyway. Nothing in planning waits on a
    thread that uses the state (the session holds the process's state lock)."""
    if state is None or isinstance(state, PostgresStore) or not reader.small:
        return nullcontext()
    return state.session()


def _with_changes(
    header: PlanHeader, data_path: Path, state: StateStore | None, dependents: dict[str, DependentTally]
) -> PlanHeader:
    """Split each LLM step's work into new rows and changed ones (see plan/changes.py)."""
    if state is None:
        return header
    job_id = job_id_for(header)
    steps = [
        _with_causes(s, _step_changes(s, data_path, state, (header.name, job_id), dependents.get(s.name)))
        if s.counts.to_run and not s.local and s.kind not in PER_GROUP
        else s
        for s in header.steps
    ]
    totals = header.totals.model_copy(update={"changed": sum(s.counts.changed for s in steps)})
    return header.model_copy(update={"steps": steps, "totals": totals})


def _step_changes(
    step: StepPlan, data_path: Path, state: StateStore, job: tuple[str, str], tally: DependentTally | None
) -> dict[str, int]:
    """A root step's changes from the plan data; a dependent step's from the requests rendered now
    and, for rows whose upstream answers do not exist yet, projected (see plan/changes.py)."""
    if tally is None:
        return changes_by_cause(data_path, step, state, *job)
    causes = rendered_changes(tally.rendered_unanswered(), step, state, *job)
    for cause, count in projected_changes(tally.projected_row_keys(), step, state, *job).items():
        causes[cause] = causes.get(cause, 0) + count
    return dict(sorted(causes.items()))


def _with_causes(step: StepPlan, causes: dict[str, int]) -> StepPlan:
    counts = step.counts.model_copy(update={"changed": sum(causes.values()), "changed_by": causes})
    return step.model_copy(update={"counts": counts})


def _dependents(
    path: Path,
    steps: list[StepPlan],
    templates: dict[str, StepTemplates],
    state: StateStore | None,
    cache: tuple[frozenset[str], bool],
    base_dir: str,
    reduce_rows: dict[str, list[Any]],
) -> dict[str, DependentTally]:
    tallies = dependent_tallies(path, steps, templates, state, cache[0], base_dir, cache[1], reduce_rows)
    if tallies:
        sample, by_name = first_row(path), {s.name: s for s in steps}
        for name, tally in tallies.items():
            if by_name[name].local:
                continue
            if not tally.known_upstream and state is not None:  # a new input: earlier runs' answers
                tally.known_upstream = earlier_answers(state, by_name[name], by_name)
            tally.projected_tokens_per_row, tally.projected_tokens_max = projected_tokens(
                by_name[name], templates[name], tally, sample, by_name
            )
    return tallies
