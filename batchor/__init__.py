"""batchor: run LLM prompts over every row of a dataset, declaratively.

import batchor
plan = batchor.plan("specs/reviews.yaml")          # priced, saved, replayable
result = batchor.apply(plan, max_cost=5)            # durable, resumable
result.data                                         # the rows with their answers
batchor.status(), batchor.runs(), batchor.export("out.parquet"), batchor.prune()
"""

import importlib
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names below load on first use (see __getattr__): `import batchor` stays fast
    from batchor.api import Plan, ValidationReport, apply, plan, validate
    from batchor.choose import Comparison, compare
    from batchor.costdiff import CostDiff, cost_diff
    from batchor.engine.events import Event
    from batchor.errors import (
        BatchorError,
        CostLimitError,
        InputError,
        NoApiKeyError,
        NoPriceError,
        PlanFileError,
        SpecError,
        StalePlanError,
        StateLockedError,
        TemplateUndefinedError,
    )
    from batchor.operations import cancel, export, export_attempts, migrate_state, prices, prune, runs, status
    from batchor.quality import CheckReport, DiffReport, check, diff
    from batchor.result import Result
    from batchor.review import export_review, import_review
    from batchor.version import __version__

__all__ = [
    "BatchorError",
    "CheckReport",
    "Comparison",
    "CostDiff",
    "CostLimitError",
    "DiffReport",
    "Event",
    "InputError",
    "NoApiKeyError",
    "NoPriceError",
    "Plan",
    "PlanFileError",
    "Result",
    "SpecError",
    "StalePlanError",
    "StateLockedError",
    "TemplateUndefinedError",
    "ValidationReport",
    "__version__",
    "apply",
    "cancel",
    "check",
    "compare",
    "cost_diff",
    "diff",
    "export",
    "export_attempts",
    "export_review",
    "import_review",
    "migrate_state",
    "plan",
    "prices",
    "prune",
    "runs",
    "status",
    "validate",
]


class _PlanPackage(types.ModuleType):
    """`batchor.plan` is the planning subpackage, callable as the function `batchor.api.plan`: one
    object, so `batchor.plan(spec)` and `import batchor.plan.compile` both work (a function bound
    over the package's name made the latter raise ImportError)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Compile a spec into a priced plan: `batchor.api.plan` (see there), loaded on first call."""
        from batchor.api import plan as compile_plan

        return compile_plan(*args, **kwargs)


importlib.import_module("batchor.plan").__class__ = _PlanPackage


_WHERE = {
    "Plan": "batchor.api",
    "ValidationReport": "batchor.api",
    "apply": "batchor.api",
    "validate": "batchor.api",
    "Event": "batchor.engine.events",
    "CostDiff": "batchor.costdiff",
    "Comparison": "batchor.choose",
    "compare": "batchor.choose",
    "cost_diff": "batchor.costdiff",
    "BatchorError": "batchor.errors",
    "CostLimitError": "batchor.errors",
    "InputError": "batchor.errors",
    "NoApiKeyError": "batchor.errors",
    "NoPriceError": "batchor.errors",
    "PlanFileError": "batchor.errors",
    "SpecError": "batchor.errors",
    "StalePlanError": "batchor.errors",
    "StateLockedError": "batchor.errors",
    "TemplateUndefinedError": "batchor.errors",
    "cancel": "batchor.operations",
    "export": "batchor.operations",
    "export_attempts": "batchor.operations",
    "migrate_state": "batchor.operations",
    "prices": "batchor.operations",
    "prune": "batchor.operations",
    "runs": "batchor.operations",
    "status": "batchor.operations",
    "CheckReport": "batchor.quality",
    "DiffReport": "batchor.quality",
    "check": "batchor.quality",
    "diff": "batchor.quality",
    "Result": "batchor.result",
    "export_review": "batchor.review",
    "import_review": "batchor.review",
    "__version__": "batchor.version",
}


def __getattr__(name: str) -> Any:
    """The public names, imported from their module when first used (PEP 562)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'batchor' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
