"""Planning: spec + input + read-only state -> a frozen, priced `CompiledPlan`.

Rows stream from DuckDB as Arrow batches; each batch is rendered, keyed, token-counted (in one
batched tokenizer call) and checked against the result cache, then appended to the plan's
parquet data. Nothing holds the whole input in Python objects.
"""

from __future__ import annotations

import datetime as dt
import os
import tempfile
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from batchor.errors import InputError, OutputStreamError, SpecError
from batchor.plan.changes import changes_by_cause, projected_changes, rendered_changes
from batchor.plan.context_cache import explicit_usd
from batchor.plan.dependent import (
    DependentTally,
    dependent_tallies,
    earlier_answers,
    first_row,
    projected_tokens,
)
from batchor.plan.estimate import with_estimates
from batchor.plan.fallback_cost import with_fallback_costs
from batchor.plan.fanout_rows import order_steps
from batchor.plan.length_fit import adjusted_for_input
from batchor.plan.mode import settle_mode
from batchor.plan.model import (
    InputInfo,
    OutputInfo,
    PlanHeader,
    PlanLimits,
    PlanTotals,
    StepCounts,
    StepPlan,
    output_per_request,
)
from batchor.plan.plan_file import CompiledPlan, file_sha256, job_id_for, plan_id_for
from batchor.plan.prices import ModelPrice
from batchor.plan.prompt_cache import cache_tokens, upper_writes, write_1h
from batchor.plan.reduce import ReduceTally
from batchor.plan.reduce_plan import reduce_tallies
from batchor.plan.render import RowTally, write_plan_data
from batchor.plan.resolve_plan import resolve_tallies
from batchor.plan.step_kind import PER_GROUP
from batchor.plan.steps import Overrides, resolve_steps
from batchor.plan.typecheck import typed_steps
from batchor.plan.variants import variant_path
from batchor.spec.inputs import InputReader, input_source
from batchor.spec.load import LoadedSpec
from batchor.spec.templates import StepTemplates
from batchor.state.base import StateStore
from batchor.state.postgres_store import PostgresStore, without_password
from batchor.version import __version__

_OUTPUT_FORMATS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".duckdb": "duckdb",
}


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
        counted = _counted(steps, tallies, rows, spec.limits.batch_threshold)
        header = _header(loaded, counted, columns, fingerprint, source, rows, overrides, state_location)
        header = header.model_copy(update={"retry_failed": retry_failed, "state_source": state_source})
        header = header.model_copy(update={"refresh": sorted(refresh)})  # apply replays them (plan/store.py)
        header = _with_variant(header, variant)
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


def _counted(steps: list[StepPlan], tallies: dict[str, Any], rows: int, batch_threshold: int) -> list[StepPlan]:
    """Each step with its counts, upstream steps first: a step below a `when:` step learns from
    them the share of its projected rows that will get the answers it reads (`answered`)."""
    answered: dict[str, float] = {}
    counted: dict[str, StepPlan] = {}
    for step in order_steps(steps):
        counted[step.name] = _with_counts(step, tallies.get(step.name), rows, batch_threshold, answered)
        answered[step.name] = answered.get(step.name, 1.0) * step.answer_share  # failed requests answer nothing
    return [counted[s.name] for s in steps]


def _with_counts(
    step: StepPlan,
    tally: RowTally | DependentTally | ReduceTally | None,
    rows: int,
    batch_threshold: int,
    answered: dict[str, float],
) -> StepPlan:
    step = settle_mode(step, tally.to_run if tally is not None else rows, batch_threshold)
    rest_input = _rest_input_mean(tally) if step.length_fit is not None and tally is not None else None
    if rest_input is not None:  # answers that grow with the input: at the rest's mean input (plan/length_fit.py)
        step = adjusted_for_input(step, rest_input)
    price = ModelPrice.from_dict(step.price) if step.price else None
    if isinstance(tally, DependentTally):
        counts = _dependent_counts(price, step, tally, answered)
    elif tally is None:
        raise AssertionError(f"step {step.name} was planned without counting its rows")
    else:
        counts = _priced(
            price,
            step,
            tally.rows,
            tally.cached,
            tally.skipped,
            tally.to_run,
            tally.input_tokens,
            estimated=not step.token_count_exact,
        )
        counts = counts.model_copy(
            update={
                "too_long": tally.too_long,
                "attachment_problems": tally.attachment_problems,
                "attachment_examples": tally.attachment_examples,
            }
        )
    if tally is not None:
        counts = counts.model_copy(update={"failed_earlier": tally.failed_earlier})
    if isinstance(tally, ReduceTally) and (tally.projected or tally.bounded):
        counts = counts.model_copy(update={"projected": tally.projected, "estimated": True})
    if isinstance(tally, DependentTally):
        tally.run_keys.clear()
    return with_fallback_costs(step.model_copy(update={"counts": counts}))


def _rest_input_mean(tally: RowTally | DependentTally | ReduceTally) -> float | None:
    """Counted input tokens per request still to run (projected rows at their expected count);
    None when nothing is left to run."""
    tokens, requests = float(tally.input_tokens), tally.to_run
    if isinstance(tally, DependentTally) and tally.projected:
        tokens, requests = tokens + tally.projected * tally.projected_tokens_per_row, requests + tally.projected
    return tokens / requests if requests else None


def _dependent_counts(
    price: ModelPrice | None, step: StepPlan, tally: DependentTally, answered: dict[str, float]
) -> StepCounts:
    """Known requests priced exactly; projected rows at the upper bound, expected (cost, input and
    output tokens) x selectivity.
    `answered`: per step counted so far, the share of its projected rows it answers (this step's is added)."""
    known = _priced(
        price,
        step,
        tally.rows,
        tally.cached,
        tally.skipped,
        tally.to_run,
        tally.input_tokens,
        estimated=not step.token_count_exact,
    )
    known = known.model_copy(update={"elements": tally.elements, "unbounded": tally.unbounded})
    if not tally.projected:
        return known
    if step.local:  # computed locally: projected rows cost nothing
        return known.model_copy(update={"projected": tally.projected})
    upper = _priced(price, step, 0, 0, 0, tally.projected, tally.projected * tally.projected_tokens_max, estimated=True)
    mean = _priced(
        price, step, 0, 0, 0, tally.projected, tally.projected * tally.projected_tokens_per_row, estimated=True
    )
    when = when_measure(step, tally)
    selectivity = when["when_ran"] / when["when_evaluated"] if when.get("when_evaluated") else 1.0
    selectivity *= upstream_share(step, tally, answered)  # rows whose upstream answer never comes
    answered[step.name] = selectivity
    share = selectivity * tally.projected_expected / tally.projected  # below a fan-out: fewer than its bound
    share *= tally.distinct_share  # rows that will render the same request send it once
    return known.model_copy(
        update={
            "to_run": known.to_run + tally.projected,
            "input_tokens": known.input_tokens + round(mean.input_tokens * share),
            "output_tokens_expected": known.output_tokens_expected + int(mean.output_tokens_expected * share),
            "output_tokens_upper": known.output_tokens_upper + upper.output_tokens_upper,
            "cost_expected": known.cost_expected + mean.cost_expected * share,
            "cost_upper": known.cost_upper + upper.cost_upper,
            "estimated": True,
            "projected": tally.projected,
            "when_decided": tally.when_decided,
            **when,
        }
    )


def upstream_share(step: StepPlan, tally: DependentTally, answered: dict[str, float]) -> float:
    """Share of projected rows that will get every answer the step reads: measured on this input's
    rows whose upstream steps are settled; with none (a new input), the share the upstream steps
    are expected to answer (the least of them: a step reading two usually reads a chain, where the
    later one answers only rows the earlier one did)."""
    if tally.evaluated + tally.skipped_upstream:
        return tally.upstream_share
    return min((answered.get(name, 1.0) for name in step.depends_on), default=1.0)


def when_measure(step: StepPlan, tally: DependentTally) -> dict[str, Any]:
    """The share of projected rows expected to run and where it comes from: decided on the row now
    (all run), the rows of this input whose upstream answers exist, or earlier jobs' rows of the
    same `when:` on the same steps when those are more (a new input has none of its own)."""
    if tally.when_decided or not step.when:
        return {"when_source": "decided on the row" if tally.when_decided else None}
    ran, evaluated = tally.evaluated - tally.skipped_by_when, tally.evaluated
    if len(step.when_history) == 2 and step.when_history[1] > evaluated:
        (ran, evaluated), source = step.when_history, "history"
    else:
        source = "this input"
    if not evaluated:
        return {"when_source": "not measured yet: every projected row counted"}
    return {"when_source": f"{source}: {ran:,} of {evaluated:,} rows", "when_evaluated": evaluated, "when_ran": ran}


def _priced(
    price: ModelPrice | None,
    step: StepPlan,
    rows: int,
    cached: int,
    skipped: int,
    to_run: int,
    input_tokens: int,
    *,
    estimated: bool,
) -> StepCounts:
    out_expected = round(to_run * output_per_request(step))  # unrounded mean: short answers lose no share
    out_upper = to_run * step.max_tokens
    # calibrated for the provider's tokenizer; re-asks send the input again, with the rejected answer and feedback
    expected_in = round(input_tokens * step.input_factor + to_run * step.reask_input_tokens)
    upper_in = int(input_tokens * step.token_upper_factor)
    cost_expected, cost_upper = _costs(price, step, to_run, (expected_in, out_expected), (upper_in, out_upper))
    return StepCounts(
        rows=rows,
        to_run=to_run,
        cached=cached,
        skipped=skipped,
        input_tokens=expected_in,
        output_tokens_expected=out_expected,
        output_tokens_upper=out_upper,
        cost_expected=cost_expected,
        cost_upper=cost_upper,
        estimated=estimated,
    )


def _costs(
    price: ModelPrice | None, step: StepPlan, requests: int, expected: tuple[int, int], upper: tuple[int, int]
) -> tuple[float, float]:
    """Expected and upper cost of `requests`: the expected one with the prompt-cache reads and
    writes the step is expected to make, the upper one with none read (plan/prompt_cache.py)."""
    if price is None:
        return 0.0, 0.0
    batch, flex = step.mode == "batch", step.service_tier == "flex"
    reads, writes = cache_tokens(step, requests)
    cost_expected = price.cost(
        *expected,
        batch=batch,
        flex=flex,
        cached_input_tokens=round(reads),
        cache_write_tokens=round(writes),
        cache_write_1h_tokens=round(write_1h(step, writes)),
    )
    cost_expected += explicit_usd(step, price)
    most = upper_writes(step, requests)
    cost_upper = explicit_usd(step, price) + price.cost(  # a flex step allowed to fall back may pay the standard tier
        *upper,
        batch=batch,
        flex=flex and not step.flex_fallback,
        cache_write_tokens=round(most),
        cache_write_1h_tokens=round(write_1h(step, most)),
    )
    return cost_expected, cost_upper


def output_target(loaded: LoadedSpec) -> tuple[Path, str]:
    """The spec's output file and its format (`validate` checks it too, so it fails offline)."""
    spec = loaded.spec
    output = spec.output.path if spec.output else f"out/{spec.name}.parquet"
    out_path = Path(os.path.normpath(loaded.resolve(output)))
    out_format = (spec.output.format if spec.output else None) or _OUTPUT_FORMATS.get(out_path.suffix.lower())
    if out_format is None:
        raise SpecError(
            f"output.path: cannot tell the format of '{output}'",
            hint="use .csv, .tsv, .parquet, .jsonl or .duckdb, or set output.format",
        )
    return out_path, out_format


def streamed(spec: Any, out_format: str, steps: list[StepPlan]) -> bool:
    """Whether the output streams (outputs/stream.py): asked for, or by default for JSONL; a
    stream asked of another format or of a fan-out (whose element rows only exist once their
    lists are stored) is refused."""
    asked = spec.output.stream if spec.output else None
    fanned = any(s.fan_out for s in steps)
    if asked and (out_format != "jsonl" or fanned):
        why = "a fan-out's element rows are written at the end" if fanned else f"the output is {out_format}"
        raise OutputStreamError(
            f"output.stream: true needs a JSONL output without a fan-out ({why})",
            hint="write a .jsonl output, or drop `stream: true` (the file is then written when the run ends)",
        )
    return asked is not False and out_format == "jsonl" and not fanned


def _header(
    loaded: LoadedSpec,
    steps: list[StepPlan],
    columns: list[str],
    fingerprint: str,
    source: Any,
    rows: int,
    overrides: Overrides,
    state_location: str | None,
) -> PlanHeader:
    spec = loaded.spec
    out_path, out_format = output_target(loaded)
    unpriced = sorted({f"{s.provider}:{s.model}" for s in steps if s.price is None and s.counts.to_run})
    totals = PlanTotals(
        rows=rows,
        requests=sum(s.counts.rows - s.counts.skipped for s in steps),
        to_run=sum(s.counts.to_run for s in steps),
        cached=sum(s.counts.cached for s in steps),
        skipped=sum(s.counts.skipped for s in steps),
        input_tokens=sum(s.counts.input_tokens for s in steps),
        output_tokens_expected=sum(s.counts.output_tokens_expected for s in steps),
        output_tokens_upper=sum(s.counts.output_tokens_upper for s in steps),
        cost_expected=sum(s.counts.cost_expected for s in steps),
        cost_upper=sum(s.counts.cost_upper for s in steps),
        unpriced_models=unpriced,
        estimates=any(s.counts.estimated for s in steps),
        failed_earlier=sum(s.counts.failed_earlier for s in steps),
        unbounded=[s.name for s in steps if s.counts.unbounded and not s.local],
    )
    return PlanHeader(
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        batchor_version=__version__,
        name=spec.name,
        spec_source=loaded.source,
        spec_text=_without_state_password(loaded.text, spec.state),
        spec=spec.model_dump(mode="json", by_alias=True) | {"state": spec.state and without_password(spec.state)},
        base_dir=str(loaded.base_dir),
        input=InputInfo(
            files=[str(p) for p in source.files],
            format=source.format,
            fingerprint=fingerprint,
            columns=columns,
            rows=rows,
            sql=source.sql,
            limit=source.limit,
            sample=source.sample,
            seed=source.seed,
            key_columns=list(source.key_columns),
            remote=list(source.remote),
        ),
        output=OutputInfo(
            path=str(out_path),
            format=out_format,
            escape_formulas=spec.output.escape_formulas if spec.output else True,
            stream=streamed(spec, out_format, steps),
        ),
        steps=steps,
        limits=PlanLimits.model_validate(spec.limits.model_dump(mode="json")),
        keep_raw=spec.keep_raw,
        totals=totals,
        state_location=state_location and without_password(state_location),
        mocked=overrides.mock,
    )


def _with_variant(header: PlanHeader, variant: tuple[str, ...]) -> PlanHeader:
    if not variant:
        return header
    spec_path = header.output.path
    output = header.output.model_copy(
        update={"path": str(variant_path(Path(spec_path), variant)), "spec_path": spec_path, "variant": list(variant)}
    )
    return header.model_copy(update={"output": output})


def _without_state_password(text: str, state: str | None) -> str:
    """The spec text as saved in a plan: a database password written in `state:` is cut out."""
    if not state or state == without_password(state):
        return text
    from sqlalchemy.engine import make_url

    password = make_url(state).password or ""
    return text.replace(state, without_password(state)).replace(str(password), "") if password else text


def check_input_unchanged(header: PlanHeader) -> str | None:
    """None when the plan's input files still hash the same (or are gone); else a reason."""
    from batchor.spec.inputs import InputSource
    from batchor.spec.remote import changed

    for pinned in header.input.remote:  # the remote object, not the local copy of its version
        if reason := changed(pinned):
            return reason
    files = tuple(Path(p) for p in header.input.files)
    if not all(p.exists() for p in files):
        return None
    source = InputSource(
        files,
        header.input.format,
        header.input.sql,
        header.input.limit,
        tuple(header.input.key_columns),
        header.input.sample,
        header.input.seed,
        tuple(header.input.remote),
    )
    try:
        current = source.fingerprint()
    except OSError as exc:
        raise InputError(f"input: cannot read {exc.filename}") from None
    return None if current == header.input.fingerprint else "the input file(s) changed since the plan was made"
