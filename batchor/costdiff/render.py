"""A cost diff printed: plain text for the terminal, markdown for a pull request comment."""

from __future__ import annotations

from batchor.costdiff import CostDiff, StepCost
from batchor.plan.summary import money


def change_text(base: float, head: float, pct: float | None) -> str:
    """`+$0.0480 (+400.0 %)`, `-$0.01 (-50.0 %)`, `+$0.0600 (new)` or `no change`."""
    delta = head - base
    if abs(delta) < 1e-12:
        return "no change"
    sign = "+" if delta > 0 else "-"
    share = "new" if pct is None else f"{pct:+.1f} %"
    return f"{sign}{money(abs(delta))} ({share})"


def cause_text(step: StepCost) -> str:
    parts = []
    for cause in step.causes:
        if cause == "model":
            parts.append(f"model {step.base_model} -> {step.head_model}")
        elif cause == "rows":
            parts.append(f"rows {step.base_requests:,} -> {step.head_requests:,} requests")
        else:
            parts.append(cause)
    return ", ".join(parts) or "-"


def _cost(value: float | None) -> str:
    return "-" if value is None else money(value)


def _headline(diff: CostDiff) -> str:
    return (
        f"Full-job cost against {diff.base} ({'git revision' if diff.base_kind == 'git' else 'saved plan'}), "
        f"every row priced as if nothing were cached: {money(diff.base_total)} -> {money(diff.head_total)}, "
        f"{change_text(diff.base_total, diff.head_total, diff.percent)}"
    )


def cost_diff_text(diff: CostDiff) -> str:
    rows = [("step", "base", "head", "change", "cause")]
    rows += [
        (s.step, _cost(s.base), _cost(s.head), change_text(s.base or 0.0, s.head or 0.0, s.percent), cause_text(s))
        for s in diff.steps
    ]
    rows.append(
        (
            "total",
            money(diff.base_total),
            money(diff.head_total),
            change_text(diff.base_total, diff.head_total, diff.percent),
            "",
        )
    )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [_headline(diff)]
    lines += ["  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(r[:4])) + "  " + r[4] for r in rows]
    return "\n".join(line.rstrip() for line in lines)


def cost_diff_markdown(diff: CostDiff) -> str:
    lines = [
        f"**{_headline(diff)}**",
        "",
        "| step | base | head | change | cause |",
        "|---|---:|---:|---:|---|",
    ]
    lines += [
        f"| {s.step} | {_cost(s.base)} | {_cost(s.head)} | "
        f"{change_text(s.base or 0.0, s.head or 0.0, s.percent)} | {cause_text(s)} |"
        for s in diff.steps
    ]
    total = change_text(diff.base_total, diff.head_total, diff.percent)
    lines.append(f"| **total** | {money(diff.base_total)} | {money(diff.head_total)} | {total} | |")
    return "\n".join(lines) + "\n"
