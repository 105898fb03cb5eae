"""Which budget applies to a run: `--max-cost` (CLI/API) and the spec's `limits.max_cost_usd`
are enforced alike, and when both are given the lower one wins. The plan says which applies."""

from __future__ import annotations

from typing import TYPE_CHECKING

from batchor.humanize import money

if TYPE_CHECKING:
    from batchor.plan.model import PlanHeader

CLI_SOURCE = "--max-cost"
SPEC_SOURCE = "limits.max_cost_usd"


def effective_max_cost(cli: float | None, spec: float | None) -> tuple[float | None, str | None]:
    """The budget that applies and where it comes from (either alone applies as given)."""
    if cli is None and spec is None:
        return None, None
    if spec is None or (cli is not None and cli <= spec):
        return cli, CLI_SOURCE
    return float(spec), SPEC_SOURCE


def plan_budget(max_cost: float | None, header: PlanHeader) -> tuple[float | None, str | None]:
    """The budget a run of this plan is held to: `max_cost` and the spec's cap the plan pinned."""
    return effective_max_cost(max_cost, header.limits.max_cost_usd)


def budget_origin(cli: float | None, spec: float | None) -> str:
    """Where the applying budget comes from, for the plan summary."""
    _, source = effective_max_cost(cli, spec)
    if cli is None or spec is None:
        return f"from {source}"
    if source == SPEC_SOURCE:
        return f"{SPEC_SOURCE} in the spec, lower than --max-cost {money(cli)}"
    if cli < spec:
        return f"--max-cost, lower than the spec's {SPEC_SOURCE} {money(spec)}"
    return f"--max-cost = {SPEC_SOURCE}"


def raise_hint(source: str | None) -> str:
    """How a user gives a job more money: the only way past a budget it has spent."""
    if source == SPEC_SOURCE:
        return (
            f"raise `{SPEC_SOURCE}` in the spec (the lower of it and --max-cost applies), then run the same "
            "command; answers already bought stay cached"
        )
    return "run the same command with a higher --max-cost (it covers the job's earlier runs too); answers stay cached"
