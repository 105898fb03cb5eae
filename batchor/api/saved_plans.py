"""Saved plan files: recognised, loaded (a plan another state sealed is refused with its powers
listed unless trusted: plan/trust.py), or the spec planned; and the state's apply lock checked
before planning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from batchor.api.planning import SpecLike, plan
from batchor.errors import BatchorError
from batchor.plan.plan_file import CompiledPlan, load_plan
from batchor.plan.trust import check_trusted, repository_spec, sealed_here
from batchor.spec.load import load_spec
from batchor.state import apply_lock, state_location


def load_or_plan(spec_or_plan: SpecLike | CompiledPlan, *, trust_plan: bool = False, **plan_args: Any) -> CompiledPlan:
    """The plan to run: given, planned from a spec, or a saved plan file. A plan file this state
    did not seal is refused with its powers listed unless `trust_plan` (plan/trust.py)."""
    if isinstance(spec_or_plan, CompiledPlan):
        return spec_or_plan
    if isinstance(spec_or_plan, (str, Path)) and "\n" not in str(spec_or_plan) and is_plan_file(spec_or_plan):
        loaded = load_plan(Path(spec_or_plan))
        location = state_location(plan_args.get("state"), loaded.header.state_location)
        spec = (
            None if trust_plan or sealed_here(loaded.header, location) else _spec_plan(loaded, plan_args.get("state"))
        )
        check_trusted(loaded.header, location, trust_plan, spec)
        return loaded
    return plan(spec_or_plan, **plan_args)


def _spec_plan(saved: CompiledPlan, state: str | None) -> Any:
    """The header of the plan the repository's copy of the spec `saved` names compiles to now (not
    saved; mocked, limited or sampled as `saved` was), to compare powers with; None without one."""
    path = repository_spec(saved.header, Path.cwd())
    if path is None:
        return None
    tags, info = saved.header.output.variant, saved.header.input
    limit = info.limit if any(t.startswith("limit-") for t in tags) else None
    sample = info.sample if any(t.startswith("sample-") for t in tags) else None
    try:
        again = plan(
            path, state=state, mock=saved.header.mocked, limit=limit, sample=sample, seed=info.seed, save=False
        )
    except BatchorError:
        return None  # the spec does not plan here: the saved plan is judged on its own
    return again.header


def ensure_unlocked(state: str | None = None, target: str | Path | None = None) -> None:
    """Refuse at once (before planning) when another apply holds the state of spec `target`.
    A saved plan is not planned again: its apply takes the lock before anything else."""
    if target is not None and is_plan_file(target):
        return
    if target is None:
        location = state_location(state)
    else:
        loaded = load_spec(target)
        location = state_location(state, loaded.spec.state, loaded.base_dir)
    if "://" not in location and Path(location + ".lock").exists():
        with apply_lock(location):
            pass


def is_plan_file(path: str | Path) -> bool:
    p = Path(path)
    if p.suffix == ".plan":
        return True
    try:
        with open(p, "rb") as handle:
            return handle.read(2) == b"PK"
    except OSError:
        return False
