"""batchor: run LLM prompts over every row of a dataset, declaratively.

    import batchor
    plan = batchor.plan("specs/reviews.yaml")          # priced, saved, replayable
    result = batchor.apply(plan, max_cost=5)            # durable, resumable
    result.data                                         # the rows with their answers
    batchor.status(), batchor.runs(), batchor.export("out.parquet"), batchor.prune()
"""

from batchor.api import Plan, ValidationReport, apply, plan, validate
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
from batchor.version import __version__

__all__ = [
    "BatchorError",
    "CheckReport",
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
    "diff",
    "export",
    "export_attempts",
    "migrate_state",
    "plan",
    "prices",
    "prune",
    "runs",
    "status",
    "validate",
]
