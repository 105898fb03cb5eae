"""Planning, the header: the plan's self-description (spec, input, output, steps, limits, totals)
and the checks that it still matches its input.

The output target and format are decided here (`validate` checks them too, offline); a database
password in `state:` never reaches the saved spec text.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

from batchor.errors import InputError, OutputStreamError, SpecError
from batchor.plan.model import (
    InputInfo,
    OutputInfo,
    PlanHeader,
    PlanLimits,
    PlanTotals,
    StepPlan,
)
from batchor.plan.steps import Overrides
from batchor.plan.variants import variant_path
from batchor.spec.load import LoadedSpec
from batchor.state.postgres_store import without_password
from batchor.version import __version__

OUTPUT_FORMATS = {  # file extension -> output format (outputs/export.py reads it too)
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".duckdb": "duckdb",
}


def output_target(loaded: LoadedSpec) -> tuple[Path, str]:
    """The spec's output file and its format (`validate` checks it too, so it fails offline)."""
    spec = loaded.spec
    output = spec.output.path if spec.output else f"out/{spec.name}.parquet"
    out_path = Path(os.path.normpath(loaded.resolve(output)))
    out_format = (spec.output.format if spec.output else None) or OUTPUT_FORMATS.get(out_path.suffix.lower())
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


def plan_header(
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


def with_variant(header: PlanHeader, variant: tuple[str, ...]) -> PlanHeader:
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
