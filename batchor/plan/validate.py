"""`validate`: everything planning checks that needs no state, no network and no keys.

It runs the same step resolution and reference checks as `plan`, so a spec that validates does
not fail later on a name, a column or a schema. Independent problems are collected, so one run
lists all of them instead of the first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from batchor.errors import Problems
from batchor.plan.compile import output_target
from batchor.plan.steps import Overrides, resolve_steps
from batchor.plan.typecheck import typed_steps
from batchor.spec.inputs import InputReader, input_source
from batchor.spec.load import LoadedSpec


@dataclass
class ValidationReport:
    spec: str
    steps: list[str]
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec, "ok": True, "steps": self.steps, "warnings": self.warnings}


def validate_loaded(loaded: LoadedSpec, overrides: Overrides) -> ValidationReport:
    """Check a loaded spec; raises the one problem found, or SpecProblemsError with all of them."""
    steps, templates = resolve_steps(loaded, overrides)
    found = Problems()
    with found.check():
        output_target(loaded)
    columns: list[str] = []
    with found.check():
        reader = InputReader(input_source(loaded))
        columns = reader.columns
        reader.close()
    if columns:
        with found.check():
            steps = typed_steps(loaded, steps, templates, columns)
    found.raise_all()
    report = ValidationReport(spec=loaded.source, steps=[st.name for st in steps])
    for st in steps:
        report.warnings += [f"steps.{st.name}: {note}" for note in st.schema_notes]
        if st.price is None:
            report.warnings.append(
                f"steps.{st.name}: no price known for {st.provider}:{st.model}; "
                "--max-cost will refuse until the spec gives `price:`"
            )
        if not st.token_count_exact and st.provider != "mock":
            report.warnings.append(
                f"steps.{st.name}: token counts for {st.provider} are estimates "
                f"(upper bound x{st.token_upper_factor:g})"
            )
    return report
