"""`batchor diff` reports as text (terminal) and markdown (a PR comment)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from batchor.humanize import money as humanize_money
from batchor.quality.render import cell, confusion_markdown, confusion_text

if TYPE_CHECKING:
    from batchor.quality.compare import DiffReport, StepDiff


def _money(value: float) -> str:
    return humanize_money(value)


def _delta(a: float | None, b: float | None, money: bool = False) -> str:
    if a is None or b is None:
        return "-"
    return f"{'+' if b >= a else '-'}{_money(abs(b - a)) if money else f'{abs(b - a):.3g}'}"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _side(label: str, run: str | None) -> str:
    return f"{label}" + (f" (run {run})" if run else "")


def diff_text(report: DiffReport) -> str:
    lines = [
        f"A: {_side(report.a, report.run_a)}",
        f"B: {_side(report.b, report.run_b)}",
        (
            f"answer cost: A {_money(report.cost_a)}, B {_money(report.cost_b)} "
            f"({_delta(report.cost_a, report.cost_b, money=True)})"
        ),
    ]
    if report.only_a or report.only_b:
        only_a, only_b = ", ".join(report.only_a) or "-", ", ".join(report.only_b) or "-"
        lines.append(f"steps only in A: {only_a}; only in B: {only_b}")
    for step in report.steps:
        lines += ["", *_step_text(step)]
    return "\n".join(lines)


def _step_text(step: StepDiff) -> list[str]:
    changed = f" ({step.changed / step.compared:.1%})" if step.compared else ""
    lines = [
        (
            f"step {step.step}: {step.compared:,} rows compared (A answered {step.rows_a:,}, B {step.rows_b:,}), "
            f"{step.changed:,} answers changed{changed}; cost A {_money(step.cost_a)}, B {_money(step.cost_b)} "
            f"({_delta(step.cost_a, step.cost_b, money=True)})"
        )
    ]
    if step.fields:
        lines.append("  agreement: " + ", ".join(f"{f.field} {_share(f.share)}" for f in step.fields))
    for f in step.fields:
        if f.confusion:
            lines += [f"  {f.field} (rows: A, columns: B):", *confusion_text(f.confusion)]
    for metric, a, b in step.metrics:
        lines.append(f"  metric {metric}: A {_fmt(a)} -> B {_fmt(b)} ({_delta(a, b)})")
    if step.examples:
        lines.append("  changed rows:")
        for ex in step.examples:
            lines += [f"    {ex['_row_key']}", f"      A {cell(ex['a'])}", f"      B {cell(ex['b'])}"]
    return lines


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def diff_markdown(report: DiffReport) -> str:
    lines = [
        "### batchor diff",
        "",
        f"- **A**: `{_side(report.a, report.run_a)}`",
        f"- **B**: `{_side(report.b, report.run_b)}`",
        (
            f"- answer cost: A {_money(report.cost_a)}, B {_money(report.cost_b)} "
            f"({_delta(report.cost_a, report.cost_b, money=True)})"
        ),
        "",
    ]
    lines += ["| step | compared | changed | cost A | cost B |", "|---|---:|---:|---:|---:|"]
    lines += [
        f"| {s.step} | {s.compared:,} | {s.changed:,} | {_money(s.cost_a)} | {_money(s.cost_b)} |" for s in report.steps
    ]
    for step in report.steps:
        lines += ["", f"#### {step.step}", ""]
        if step.fields:
            lines += ["| field | agreement |", "|---|---:|"]
            lines += [f"| {f.field} | {_share(f.share)} |" for f in step.fields]
        for f in step.fields:
            if f.confusion:
                lines += ["", *confusion_markdown(f.confusion, f"{f.field}: A \\ B")]
        if step.metrics:
            lines += ["", "| metric | A | B | delta |", "|---|---:|---:|---:|"]
            lines += [f"| {m} | {_fmt(a)} | {_fmt(b)} | {_delta(a, b)} |" for m, a, b in step.metrics]
        if step.examples:
            lines += ["", "| row | A | B |", "|---|---|---|"]
            lines += [f"| {cell(ex['_row_key'])} | {cell(ex['a'])} | {cell(ex['b'])} |" for ex in step.examples]
    return "\n".join(lines)
