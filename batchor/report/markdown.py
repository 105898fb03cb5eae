"""The run report as markdown, short enough for a pull-request comment."""

from __future__ import annotations

from typing import Any

from batchor.humanize import count, millis, models_worth_showing, money, percent
from batchor.quality.render import markdown_text
from batchor.report.quality_html import per_class, rounded
from batchor.report.summary import headline

MAX_CELL = 120


def _cell(value: Any) -> str:
    """Table-safe text: one line, pipes escaped, cut to MAX_CELL."""
    text = " ".join(str("-" if value is None else value).split()).replace("|", "\\|")
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def render_markdown(report: dict[str, Any]) -> str:
    run = report["run"]
    lines = [f"### batchor run `{run['run_id']}` ({_cell(run.get('name'))})", "", headline(report), ""]
    lines += [
        "| step | rows | answered | failed | failure rate | re-asked | tokens in/out | cost | latency p50/p90 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in report.get("steps") or []:
        latency = "/".join(millis(s.get(k)) for k in ("latency_p50_ms", "latency_p90_ms"))
        reasked = percent(s.get("reasked") or 0, s.get("requests_sent") or 0)
        lines.append(
            f"| {_cell(s['step'])} | {count(s['rows'])} | {count(s['succeeded'])} | {count(s['failed'])} | "
            f"{percent(s['failed'], s['rows'])} | {reasked}"
            f" | {count(s.get('input_tokens'))}/{count(s.get('output_tokens'))} | {money(s.get('cost_usd'))} "
            f"| {latency} |"
        )
    lines += _model_lines(run.get("models") or [])
    failures = report.get("failures") or []
    if failures:
        lines += ["", "**Failures**", ""]
        for g in failures:
            example = g["examples"][0] if g["examples"] else None
            lines.append(
                f"- `{_cell(g['step'])}` {_cell(g['reason'])}: {count(g['rows'])} row(s)"
                + (f", e.g. `{_cell(example.get('row_key'))}`: {_cell(example.get('error'))}" if example else "")
            )
    lines += _metrics_lines(report.get("checks"))
    checks = report.get("checks")
    if checks and checks.get("checks"):
        lines += ["", "**Checks**: " + ("all pass" if checks["passed"] else "FAILED"), ""]
        lines += [f"- {'pass' if c['passed'] else 'FAIL'} {markdown_text(c['name'])}" for c in checks["checks"]]
    return "\n".join(lines) + "\n"


def _model_lines(models: list[dict[str, Any]]) -> list[str]:
    """Calls and spend per model, when a step was answered by more than one (fallback, escalation)."""
    models = models_worth_showing(models)
    if not models:
        return []
    lines = ["", "**By model**", "", "| step | model | answered | failed | cost |", "|---|---|---:|---:|---:|"]
    for m in models:
        lines.append(
            f"| {_cell(m['step'])} | {_cell(m['model'] or '(not recorded)')} | {count(m['answered'])} "
            f"| {count(m['failed'])} | {money(m['cost_usd'])} |"
        )
    return lines


def _metrics_lines(checks: dict[str, Any] | None) -> list[str]:
    """Golden-label metrics: one line per field, then per-class precision/recall/F1/support."""
    metrics = (checks or {}).get("metrics") or []
    if not metrics:
        return []
    lines = ["", "**Golden-label metrics**", "", "| field | metric | value | rows compared |", "|---|---|---:|---:|"]
    for m in metrics:
        headline = {k: v for k, v in (m.get("metrics") or {}).items() if "." not in k}
        lines += [
            f"| {_cell(m['field'])} | {_cell(k)} | {rounded(v)} | {count(m.get('labelled'))} |"
            for k, v in headline.items()
        ]
    for m in (m for m in metrics if m.get("confusion")):
        lines += ["", f"`{_cell(m['field'])}` per class:", "", "| class | precision | recall | F1 | support |"]
        lines.append("|---|---:|---:|---:|---:|")
        lines += [
            f"| {_cell(c)} | {rounded(p)} | {rounded(r)} | {rounded(f)} | {n} |" for c, p, r, f, n in per_class(m)
        ]
    return lines
