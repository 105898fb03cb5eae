"""Choosing the model: the same seeded sample on several models, each measured against the spec.

`batchor compare SPEC --models a,b,c --sample N` answers N rows on each model (a pilot each:
cached in the state, within one `--max-cost` for all, priced before any call), then says per model
what the sample cost, what the whole job would cost (the pilot estimator, with its 90 % interval),
how many of the spec's `checks:` held, its golden-label metrics (`expected:`), how often it agreed
with the reference model and its median latency; and names the cheapest model passing every check
(`ChecksFailedError`, exit 9, when none does).

The face: `compare(spec, models, sample, ...) -> Comparison` and `Comparison.gate()`; inside:
run.py (budget, pilots, measures), result.py (the figures and the verdict), render.py (printing).
"""

from __future__ import annotations

from batchor.choose.result import Comparison, ModelResult
from batchor.choose.run import check_budget, compare
from batchor.errors import ChecksFailedError


def gate(comparison: Comparison) -> None:
    """Raise `ChecksFailedError` (exit 9) when no model passed every check."""
    if comparison.cheapest_passing is None:
        failed = "; ".join(f"{r.model}: {r.checks_passed}/{r.checks_total}" for r in comparison.results)
        raise ChecksFailedError(
            f"no model passes every check of {comparison.spec} on the sample ({failed})",
            hint="add a stronger model to --models, or fix the prompt or the check; the answers are kept",
        )


__all__ = ["Comparison", "ModelResult", "check_budget", "compare", "gate"]
