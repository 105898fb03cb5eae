"""`status` and `runs`: each step's estimate (what the plan expected, where from) next to what the
run spent, and their ratio (state/answer_stats.run_step_report gives the figures; a run that
stopped early is held to the part it settled, and the table says which part)."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.markup import escape
from rich.table import Table

from batchor.humanize import NOTHING, money


def ratio_text(ratio: float | None, settled: int | None = None, requests: int | None = None) -> str:
    """The ratio; for a run that settled only part of its requests, which part it is held to."""
    if ratio is None:
        return NOTHING
    part = f" ({settled:,} of {requests:,} requests)" if settled is not None and requests and settled < requests else ""
    return f"{ratio:.2f}x{part}"


def estimate_table(steps: list[dict[str, Any]]) -> Table | None:
    """`status`: per step, expected (at most), spent, actual / expected, and the estimate's sources."""
    if not steps:
        return None
    table = Table(title="estimate vs actual", title_justify="left", box=box.SIMPLE_HEAD)
    for name in ("step", "expected", "at most", "spent", "ratio", "output estimate", "input tokens"):
        table.add_column(name, justify="right" if name in ("expected", "at most", "spent", "ratio") else "left")
    for s in steps:
        kind = f" [{s['kind']}]" if s.get("kind") not in (None, "apply") else ""
        table.add_row(
            escape(s["step"] + kind),
            money(s["expected_usd"]),
            money(s["upper_usd"]),
            money(s["actual_usd"]),
            ratio_text(s["ratio"], s.get("settled_requests"), s["requests"]),
            escape(s["output_source"] or NOTHING),
            escape(s["input_source"] or "estimate"),
        )
    return table


def run_ratio(steps: list[dict[str, Any]]) -> str:
    """`runs`: the run's spend over its plan's expected cost of the requests it settled (all steps)."""
    from batchor.operations import report_totals

    return ratio_text(report_totals(steps)["ratio"])
