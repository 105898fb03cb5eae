"""Check reports and diffs as text (terminal) and markdown (a PR comment)."""

from __future__ import annotations

import html
import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from batchor.quality.checks import CheckOutcome, CheckReport
    from batchor.quality.metrics import FieldMetrics

_MAX_CELL = 80


def cell(value: Any) -> str:
    """A value for one table cell: JSON for structures, cut to a readable length, pipes escaped."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return (text[: _MAX_CELL - 1] + "…" if len(text) > _MAX_CELL else text).replace("|", "\\|")


def _figure(value: float | None, kind: str) -> str:
    if value is None:
        return "-"
    return f"{value:.1%}" if kind in ("row", "sql", "distribution") else f"{value:.4g}"


def checks_text(report: CheckReport) -> str:
    lines = [f"checks for {report.source}" + (f" (run {report.run_id})" if report.run_id else "")]
    for c in report.checks:
        mark = "PASS" if c.passed else "FAIL"
        lines.append(f"  {mark}  {c.scope}: {c.name}  {_figure(c.value, c.kind)} ({c.threshold}); {c.detail}")
        lines += [f"        e.g. {cell(example)}" for example in (c.examples if not c.passed else [])]
    for m in report.metrics:
        lines.append(
            f"  metric {m.name} vs {m.column} ({m.kind}, {m.labelled:,} labelled rows"
            + (f", {m.unanswered:,} unanswered" if m.unanswered else "")
            + "): "
            + _metric_summary(m)
        )
    passed = sum(c.passed for c in report.checks)
    lines.append(f"{passed} of {len(report.checks)} checks passed" if report.checks else "no checks in the spec")
    return "\n".join(lines)


def _metric_summary(m: FieldMetrics) -> str:
    main = {k: v for k, v in m.values.items() if "." not in k}
    return ", ".join(f"{k} {v:.3g}" for k, v in main.items()) or "no labelled rows"


def checks_markdown(report: CheckReport) -> str:
    failed = f"❌ {len(report.failed)} of {len(report.checks)} checks failed"
    verdict = "✅ all checks passed" if report.passed else failed
    lines = [f"### batchor checks: `{report.source}`", "", verdict, ""]
    if report.checks:
        lines += ["| | scope | check | value | threshold | detail |", "|---|---|---|---:|---|---|"]
        lines += [_check_row(c) for c in report.checks]
    failing = [c for c in report.checks if c.examples and not c.passed]
    for c in failing:
        lines += ["", f"<details><summary>failing rows of {markdown_text(c.name)}</summary>", ""]
        lines += [f"- `{cell(example)}`" for example in c.examples] + ["", "</details>"]
    for m in report.metrics:
        lines += ["", *metrics_markdown(m)]
    return "\n".join(lines)


def markdown_text(value: Any) -> str:
    """A value as literal Markdown text in a table cell: markup characters and HTML escaped, so a
    check named `**x**`, `a|b` or `</code><img ...>` shows as written and cannot change the page."""
    text = html.escape(cell(value).replace("\\|", "|"), quote=False)
    return re.sub(r"([\\`*_{}\[\]()#+!|~>-])", r"\\\1", text)


def _check_row(c: CheckOutcome) -> str:
    mark = "✅" if c.passed else "❌"
    name, figure = markdown_text(c.name), _figure(c.value, c.kind)
    return f"| {mark} | {c.scope} | {name} | {figure} | {c.threshold} | {cell(c.detail)} |"


def metrics_markdown(m: FieldMetrics) -> list[str]:
    lines = [
        f"**{m.name}** vs `{m.column}` ({m.kind}): {m.labelled:,} labelled rows"
        + (f", {m.unanswered:,} unanswered" if m.unanswered else ""),
        "",
    ]
    lines += ["| metric | value |", "|---|---:|"] + [f"| {k} | {v:.3f} |" for k, v in m.values.items()]
    if m.confusion:
        lines += ["", *confusion_markdown(m.confusion, "expected \\ answered")]
    return lines


def confusion_markdown(pairs: list[tuple[str, str, int]], corner: str) -> list[str]:
    """A confusion matrix (rows: first value, columns: second value) as a markdown table."""
    rows = sorted({a for a, _, _ in pairs})
    cols = sorted({b for _, b, _ in pairs})
    counts = {(a, b): n for a, b, n in pairs}
    lines = [f"| {corner} | " + " | ".join(cell(c) or "(none)" for c in cols) + " |", "|---|" + "---:|" * len(cols)]
    for r in rows:
        lines.append(f"| {cell(r) or '(none)'} | " + " | ".join(str(counts.get((r, c), 0)) for c in cols) + " |")
    return lines


def confusion_text(pairs: list[tuple[str, str, int]], indent: str = "    ") -> list[str]:
    rows = sorted({a for a, _, _ in pairs})
    cols = sorted({b for _, b, _ in pairs})
    counts = {(a, b): n for a, b, n in pairs}
    width = max([len(x) for x in rows + cols] + [6])
    lines = [indent + " " * width + " " + " ".join(f"{c or '(none)':>{width}}" for c in cols)]
    for r in rows:
        figures = " ".join(f"{counts.get((r, c), 0):>{width}}" for c in cols)
        lines.append(indent + f"{r or '(none)':>{width}} " + figures)
    return lines
