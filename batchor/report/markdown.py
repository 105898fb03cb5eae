"""The run report as markdown, short enough for a pull-request comment."""

from __future__ import annotations

from typing import Any

from batchor.humanize import count, millis, money, percent
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
    failures = report.get("failures") or []
    if failures:
        lines += ["", "**Failures**", ""]
        for g in failures:
            example = g["examples"][0] if g["examples"] else None
            lines.append(
                f"- `{_cell(g['step'])}` {_cell(g['reason'])}: {count(g['rows'])} row(s)"
                + (f", e.g. `{_cell(example.get('row_key'))}`: {_cell(example.get('error'))}" if example else "")
            )
    checks = report.get("checks")
    if checks and checks.get("checks"):
        lines += ["", "**Checks**: " + ("all pass" if checks["passed"] else "FAILED"), ""]
        lines += [f"- {'pass' if c['passed'] else 'FAIL'} {_cell(c['name'])}" for c in checks["checks"]]
    return "\n".join(lines) + "\n"
