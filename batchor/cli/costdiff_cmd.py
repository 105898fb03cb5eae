"""`plan --compare-to BASE [--fail-on-increase PCT]`: the full job's cost at BASE and now, printed
after the plan (batchor/costdiff/). Parsing and printing only."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from batchor.errors import UsageError
from batchor.lazy import Deferred

if TYPE_CHECKING:
    from batchor import costdiff
    from batchor.costdiff import CostDiff
else:
    costdiff = Deferred("batchor.costdiff")

CompareToOpt = typer.Option(
    None,
    "--compare-to",
    metavar="BASE",
    help="Also print the FULL job's cost (every row, as if nothing were cached) at BASE and now, per step "
    "with the cause: BASE is a saved .plan file or a git revision of the spec (main, origin/main, a commit)",
)
FailOnIncreaseOpt = typer.Option(
    None,
    "--fail-on-increase",
    min=0.0,
    metavar="PCT",
    help="With --compare-to: exit 11 (cost_increase) when the full job costs more than PCT % above BASE",
)


def check_options(compare_to: Optional[str], fail_on_increase: Optional[float], pilot: Optional[str]) -> None:
    if fail_on_increase is not None and compare_to is None:
        raise UsageError("--fail-on-increase needs --compare-to BASE (the cost it compares with)")
    if compare_to is not None and pilot is not None:
        raise UsageError("--compare-to does not combine with --pilot", hint="plan --compare-to BASE without --pilot")


def cost_diff(spec: Path, compare_to: Optional[str], options: dict[str, Any]) -> "CostDiff | None":
    """The cost diff the plan prints (None: no --compare-to); its gate is applied after printing."""
    if compare_to is None:
        return None
    return costdiff.cost_diff(spec, compare_to, **options)


def show(diff: "CostDiff | None", fmt: str) -> None:
    """The diff after the plan: markdown for a PR comment, text on the terminal (JSON: in the plan's)."""
    if diff is None or fmt == "json":
        return
    from batchor.costdiff.render import cost_diff_markdown, cost_diff_text

    typer.echo("\n" + (cost_diff_markdown(diff) if fmt == "markdown" else cost_diff_text(diff)))
