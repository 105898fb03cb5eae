"""The Python API, and what the CLI calls: validate, plan, apply.

Everything a user can do goes through here, so the CLI stays a thin layer of parsing and printing.
`spec` is a path, a YAML string or a dict; `data` (a pandas/polars DataFrame, an Arrow table or a
path) replaces the spec's input. Planning is in api/planning.py, saved plan files in
api/saved_plans.py, running a plan in api/running.py; every name is importable from here.
"""

from __future__ import annotations

from pathlib import Path as Path

from batchor.api.planning import MODES as MODES
from batchor.api.planning import SpecLike as SpecLike
from batchor.api.planning import check_arguments as check_arguments
from batchor.api.planning import missing_keys as missing_keys
from batchor.api.planning import plan, validate
from batchor.api.planning import plans_dir as plans_dir
from batchor.api.planning import required_keys as required_keys
from batchor.api.running import apply, apply_compiled
from batchor.api.running import to_result as to_result
from batchor.api.saved_plans import ensure_unlocked as ensure_unlocked
from batchor.api.saved_plans import is_plan_file, load_or_plan
from batchor.engine.events import Event as Event
from batchor.engine.run import RunOutcome as RunOutcome
from batchor.plan.budget import SPEC_SOURCE as SPEC_SOURCE  # how the CLI says which budget to raise
from batchor.plan.budget import raise_hint as raise_hint
from batchor.plan.plan_file import CompiledPlan
from batchor.plan.summary import causes_text as causes_text  # the printed forms of a plan, for the CLI
from batchor.plan.summary import money as money
from batchor.plan.summary import plan_dict as plan_dict
from batchor.plan.summary import plan_markdown as plan_markdown
from batchor.plan.summary import plan_text as plan_text
from batchor.plan.summary import shared_rows as shared_rows
from batchor.plan.validate import ValidationReport
from batchor.result import Result

Plan = CompiledPlan

__all__ = [
    "Plan",
    "Result",
    "ValidationReport",
    "apply",
    "apply_compiled",
    "is_plan_file",
    "load_or_plan",
    "plan",
    "validate",
]
