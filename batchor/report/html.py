"""The run report as one self-contained HTML page: inline CSS, inline SVG charts, no script, no
network, so it opens from disk and from CI artifacts. Every value from the state (model text
above all) is untrusted and goes through `esc`.
"""

from __future__ import annotations

from html import escape
from typing import Any

from batchor.humanize import NOTHING, count, duration, elapsed, millis, models_worth_showing, moment, money, percent
from batchor.report.quality_html import CSS as QUALITY_CSS
from batchor.report.quality_html import (
    distribution_section,
    flagged_section,
    metrics_section,
    samples_section,
)
from batchor.report.summary import headline

CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
main{max-width:1100px;margin:0 auto;padding:24px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde1e7}
h3{font-size:15px;margin:16px 0 6px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:14px 0}
.card{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:10px 14px;min-width:150px}
.card b{display:block;font-size:18px}.card span{color:#5b6475;font-size:12px}
table{border-collapse:collapse;background:#fff;width:100%;margin:6px 0}
th,td{border:1px solid #e3e6eb;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef1f5}td.n{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#fff;border:1px solid #e3e6eb;padding:8px;white-space:pre-wrap;word-break:break-word;
max-height:320px;overflow:auto;margin:4px 0;font-size:12px}
.ok{color:#17753a}.bad{color:#b42318}.warn{color:#9a6700}.muted{color:#5b6475}
svg{background:#fff;border:1px solid #e3e6eb;margin:4px 0}
"""  # the quality sections' own rules follow (report/quality_html.py)
STATUS_CLASS = {
    "succeeded": "ok",
    "failed": "bad",
    "died": "bad",
    "partial": "warn",
    "budget": "warn",
    "paused": "warn",
    "interrupted": "warn",
}


def esc(value: Any) -> str:
    """Any value as HTML text (None as '-')."""
    return escape(NOTHING if value is None else str(value), quote=True)


def render_html(report: dict[str, Any]) -> str:
    run = report["run"]
    title = f"batchor run {run['run_id']} ({run.get('name') or ''})"
    profile = report.get("profile")
    body = [
        f"<h1>{esc(title)}</h1>",
        f"<p class=muted>{esc(headline(report))}</p>",
        f"<p class=muted>output <code>{esc(run.get('output_path'))}</code>; times in "
        f"{esc(report.get('timezone') or 'local time')}</p>",
        _cards(report),
        _steps_section(report),
        _models_section(report["run"].get("models") or []),
        metrics_section(report.get("checks")),
        distribution_section(profile),
        flagged_section(profile),
        _failures_section(report),
        samples_section(report.get("samples") or [], (profile or {}).get("seed")),
        _checks_section(report.get("checks")),
        _plan_section(report.get("plan")),
    ]
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        "<meta http-equiv=Content-Security-Policy content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>{esc(title)}</title><style>{CSS}{QUALITY_CSS}</style></head><body><main>"
        + "".join(body)
        + "</main></body></html>\n"
    )


def _card(label: str, value: str, css: str = "") -> str:
    return (
        f"<div class=card><span>{esc(label)}</span><b class='{css}' data-figure='{esc(label)}'>{esc(value)}</b></div>"
    )


def _cards(report: dict[str, Any]) -> str:
    run, plan = report["run"], report.get("plan") or {}
    spend = run.get("spend") or {}
    total = spend.get("total_usd") or run.get("cost_usd") or 0.0
    budget = plan.get("budget_usd")
    totals = plan.get("totals") or {}
    took = elapsed(run.get("started_at"), run.get("finished_at"))
    ended = run.get("rows")  # the output's rows when the run ended; else its requests
    done, failed, unit = (
        (ended["succeeded"], ended["failed"], "rows")
        if ended
        else (run.get("succeeded"), run.get("failed"), "requests")
    )
    of = sum(ended.values()) if ended else run.get("requests")
    cards = [
        _card("status", run.get("status") or NOTHING, STATUS_CLASS.get(run.get("status") or "", "")),
        _card(f"{unit} {'succeeded' if ended else 'answered'}", f"{count(done)} of {count(of)}"),
        _card(f"{unit} failed", count(failed), "bad" if failed else ""),
        _card("spend", money(total, estimated=bool(spend.get("estimated_usd")))),
        _card("budget", money(budget) if budget is not None else "none set"),
        _card(
            "estimate",
            f"{money(totals.get('cost_expected'))} (at most {money(totals.get('cost_upper'))})" if totals else NOTHING,
        ),
        _card("wasted", money(spend.get("wasted_usd"))),
        _card("saved by prompt caching", money(spend.get("cache_saved_usd"))),
        _card("duration", duration(took) if took is not None else "not finished"),
        _card("started", moment(run.get("started_at"))),
    ]
    return "<section class=cards>" + "".join(cards) + "</section>" + _spend_bar(total, budget, totals)


def _spend_bar(total: float, budget: float | None, totals: dict[str, Any]) -> str:
    """Spend against the budget (or the plan's upper bound) as one horizontal bar."""
    scale = budget or totals.get("cost_upper") or 0.0
    if not scale:
        return ""
    share = min(total / scale, 1.0)
    label = "budget" if budget else "plan upper bound"
    return (
        f"<svg width=600 height=34 role=img aria-label='spend vs {label}'>"
        "<rect x=0 y=6 width=600 height=16 fill='#e3e6eb'/>"
        f"<rect x=0 y=6 width={600 * share:.1f} height=16 fill='#3867d6'/>"
        f"<text x=4 y=32 font-size=10>{esc(money(total))} of {esc(money(scale))} ({esc(label)})</text></svg>"
    )


def _steps_section(report: dict[str, Any]) -> str:
    steps = report.get("steps") or []
    if not steps:
        return "<h2>Steps</h2><p class=muted>no step has rows yet</p>"
    head = (
        "<tr><th>step</th><th>rows</th><th>answered</th><th>failed</th><th>pending</th><th>failure rate</th>"
        "<th>cached</th><th>saved by the cache</th>"
        "<th>attempts</th><th>re-asked</th><th>tokens in</th><th>tokens out</th><th>cost</th>"
        "<th>latency p50</th><th>p90</th><th>p99</th></tr>"
    )
    rows = "".join(
        f"<tr><td>{esc(s['step'])}</td><td class=n>{count(s['rows'])}</td><td class=n>{count(s['succeeded'])}</td>"
        f"<td class=n>{count(s['failed'])}</td><td class=n>{count(s['pending'])}</td>"
        f"<td class=n>{esc(percent(s['failed'], s['rows']))}</td><td class=n>{count(s.get('cached'))}</td>"
        f"<td class=n>{esc(money(s.get('saved_usd')))}</td><td class=n>{count(s.get('attempts'))}</td>"
        f"<td class=n>{esc(percent(s.get('reasked') or 0, s.get('requests_sent') or 0))}</td>"
        f"<td class=n>{count(s.get('input_tokens'))}</td><td class=n>{count(s.get('output_tokens'))}</td>"
        f"<td class=n>{esc(money(s.get('cost_usd')))}</td>"
        + "".join(f"<td class=n>{esc(_ms(s.get(f'latency_{q}_ms')))}</td>" for q in ("p50", "p90", "p99"))
        + "</tr>"
        for s in steps
    )
    charts = "".join(
        f"<h3>{esc(s['step'])}: latency per attempt</h3>{_histogram(s['latency_histogram'])}"
        for s in steps
        if s.get("latency_histogram")
    )
    return f"<h2>Steps</h2><table>{head}{rows}</table>{charts}"


def _models_section(models: list[dict[str, Any]]) -> str:
    """Calls and spend per model, when a step was answered by more than one (fallback, escalation)."""
    models = models_worth_showing(models)
    if not models:
        return ""
    rows = "".join(
        f"<tr><td>{esc(m['step'])}</td><td>{esc(m['model'] or '(not recorded)')}</td>"
        f"<td class=n>{count(m['answered'])}</td><td class=n>{count(m['failed'])}</td>"
        f"<td class=n>{esc(money(m['cost_usd']))}</td></tr>"
        for m in models
    )
    head = "<tr><th>step</th><th>model</th><th>answered</th><th>failed or rejected</th><th>cost</th></tr>"
    return f"<h2>By model</h2><table>{head}{rows}</table>"


def _ms(value: float | None) -> str:
    return millis(value)


def _histogram(buckets: list[dict[str, Any]]) -> str:
    """Attempts per latency bucket (log2 buckets) as an SVG bar chart with axis titles."""
    left, width, height, top = 50, 600, 140, max(b["attempts"] for b in buckets)
    bar = width / max(len(buckets), 1)
    parts = [
        f"<svg width={left + width + 10} height={height + 56} role=img aria-label='latency histogram'>",
        f"<line x1={left} y1=0 x2={left} y2={height} stroke='#5b6475'/>",
        f"<line x1={left} y1={height} x2={left + width} y2={height} stroke='#5b6475'/>",
        f"<text x={left - 4} y=10 font-size=9 text-anchor=end>{esc(count(top))}</text>",
        f"<text x={left - 4} y={height} font-size=9 text-anchor=end>0</text>",
        f"<text x=12 y={height / 2:.0f} font-size=11 text-anchor=middle "
        f"transform='rotate(-90 12 {height / 2:.0f})'>attempts</text>",
        f"<text x={left + width / 2:.0f} y={height + 50} font-size=11 text-anchor=middle>"
        "latency per attempt (bucket from, log scale)</text>",
    ]
    for i, b in enumerate(buckets):
        h, x = height * b["attempts"] / top, left + i * bar
        parts.append(
            f"<rect x={x + 2:.1f} y={height - h:.1f} width={bar - 4:.1f} height={h:.1f} fill='#3867d6'>"
            f"<title>{esc(count(b['attempts']))} attempts, {esc(_ms(b['from_ms']))} to {esc(_ms(b['to_ms']))}</title>"
            f"</rect><text x={x + 2:.1f} y={height + 12} font-size=9>{esc(_ms(b['from_ms']))}</text>"
            f"<text x={x + 2:.1f} y={height + 24} font-size=9>{esc(count(b['attempts']))}</text>"
        )
    return "".join(parts) + "</svg>"


def _failures_section(report: dict[str, Any]) -> str:
    groups = report.get("failures") or []
    if not groups:
        return "<h2>Failures</h2><p class=ok>no failed rows</p>"
    parts = ["<h2>Failures</h2>"]
    for g in groups:
        parts.append(
            f"<h3>{esc(g['step'])}: <span class=bad>{esc(g['reason'])}</span>, {esc(count(g['rows']))} row(s)</h3>"
        )
        for ex in g["examples"]:
            parts.append(f"<p>row <code>{esc(ex['row_key'])}</code>: {esc(ex.get('error'))}</p>")
            if ex.get("raw"):
                parts.append(f"<details><summary>raw model response</summary><pre>{esc(ex['raw'])}</pre></details>")
    return "".join(parts)


def _checks_section(checks: dict[str, Any] | None) -> str:
    if not checks or not checks.get("checks"):
        return ""  # golden-label metrics have their own section (report/quality_html.py)
    rows = "".join(
        f"<tr><td>{esc(c['name'])}</td><td class={'ok' if c['passed'] else 'bad'}>"
        f"{'pass' if c['passed'] else 'FAIL'}</td><td class=n>{esc(_num(c.get('value')))}</td>"
        f"<td class=n>{esc(_num(c.get('threshold')))}</td><td>{esc(c.get('detail'))}</td></tr>"
        for c in checks.get("checks") or []
    )
    verdict = "<p class=ok>all checks pass</p>" if checks.get("passed") else "<p class=bad>checks failed</p>"
    return (
        f"<h2>Checks</h2>{verdict}<table><tr><th>check</th><th>result</th><th>value</th>"
        f"<th>threshold</th><th>detail</th></tr>{rows}</table>"
    )


def _num(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else (NOTHING if value is None else str(value))


def _plan_section(plan: dict[str, Any] | None) -> str:
    if plan is None:
        return "<h2>Plan</h2><p class=muted>the run's plan file is not available</p>"
    rows = "".join(
        f"<tr><td>{esc(s['name'])}</td><td>{esc(s['provider'])}:{esc(s['model'])}</td>"
        f"<td>{esc(s['mode'])}</td>"
        + "".join(f"<td class=n>{count(s.get(k))}</td>" for k in ("rows", "to_run", "cached"))
        + "".join(f"<td class=n>{esc(money(s.get(k)))}</td>" for k in ("cost_expected", "cost_upper"))
        + "</tr>"
        for s in plan["steps"]
    )
    return (
        f"<h2>Plan</h2><p>plan <code>{esc(plan['plan_id'])}</code> ({esc(plan['file'])})</p><table><tr>"
        "<th>step</th><th>model</th><th>mode</th><th>rows</th><th>to run</th><th>cached</th><th>expected</th>"
        f"<th>upper bound</th></tr>{rows}</table><details><summary>spec</summary>"
        f"<pre>{esc(plan.get('spec_text'))}</pre></details>"
    )
