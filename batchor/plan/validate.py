"""`validate`: everything planning checks that needs no state, no network and no keys.

It runs the same step resolution and reference checks as `plan`, so a spec that validates does
not fail later on a name, a column, a schema or a check. Independent problems are collected, so
one run lists all of them instead of the first: a step that cannot be resolved still has its
templates checked against the input's columns, and the other steps go on to the next checks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from batchor.errors import Problems
from batchor.plan.compile import output_target
from batchor.plan.model import StepPlan
from batchor.plan.steps import Overrides, resolve_steps
from batchor.plan.targets import check_output_path
from batchor.plan.typecheck import typed_steps
from batchor.providers.facts import provider_facts
from batchor.spec.inputs import InputReader, input_source
from batchor.spec.load import LoadedSpec
from batchor.spec.pair_columns import pair_schema

# Binds the spec's `checks:` to the answers these steps would give (batchor.quality.bind_checks):
# passed in by the API, as quality sits above planning.
CheckBinder = Callable[[LoadedSpec, pa.Schema, list[StepPlan]], None]


@dataclass
class ValidationReport:
    spec: str
    steps: list[str]
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec, "ok": True, "steps": self.steps, "warnings": self.warnings}


def validate_loaded(
    loaded: LoadedSpec, overrides: Overrides, bind_checks: CheckBinder | None = None
) -> ValidationReport:
    """Check a loaded spec; raises the one problem found, or SpecProblemsError with all of them."""
    found = Problems()
    steps, templates = resolve_steps(loaded, overrides, found)
    inputs = _input_schema(loaded, found)
    with found.check():
        out_path, _ = output_target(loaded)
        files = input_source(loaded).files if inputs is not None else []
        check_output_path(out_path, inputs=files, spec=_spec_file(loaded))
    if inputs is not None:
        steps = typed_steps(loaded, steps, templates, list(inputs.names), found)
        if bind_checks is not None:
            with found.check():
                bind_checks(loaded, inputs, steps)
    found.raise_all()
    return _report(loaded, steps)


def _spec_file(loaded: LoadedSpec) -> str | None:
    return loaded.source if not loaded.source.startswith("<") else None


def _input_schema(loaded: LoadedSpec, found: Problems) -> pa.Schema | None:
    """The input's columns and their types (no rows read), or None with its problem recorded."""
    with found.check():
        reader = InputReader(input_source(loaded))
        try:
            schema = reader.schema()
            return pair_schema(schema) if loaded.spec.resolve is not None else schema
        finally:
            reader.close()
    return None


def _report(loaded: LoadedSpec, steps: list[StepPlan]) -> ValidationReport:
    report = ValidationReport(spec=loaded.source, steps=[st.name for st in steps])
    for st in steps:
        report.warnings += [f"steps.{st.name}: {note}" for note in st.schema_notes]
        if st.price is None:
            report.warnings.append(
                f"steps.{st.name}: no price known for {st.provider}:{st.model}; "
                "--max-cost will refuse until the spec gives `price:`"
            )
        if not st.token_count_exact and not provider_facts(st.provider).offline:
            report.warnings.append(
                f"steps.{st.name}: token counts for {st.provider} are estimates "
                f"(upper bound x{st.token_upper_factor:g})"
            )
    return report
