"""The report's quality sections: golden-label metrics per step and field as a table, each enum's
confusion matrix as a table, a bar chart of answer values per enum/boolean field, sample answers
(seeded random and one per class) with their input and the prompt as sent, flagged answers.

Figures are rounded for reading (3 digits); every value from the state goes through `esc`.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from batchor.humanize import NOTHING, count

BAR_WIDTH = 360  # px of the longest bar in a value chart


def esc(value: Any) -> str:
    return escape(NOTHING if value is None else str(value), quote=True)


def rounded(value: Any) -> str:
    """A metric to 3 digits (0.193, 12.5); counts stay whole."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return NOTHING if value is None else str(value)
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def metrics_section(checks: dict[str, Any] | None) -> str:
    """Per step and field: its headline figures, per-class precision/recall/F1/support, confusion."""
    metrics = (checks or {}).get("metrics") or []
    if not metrics:
        return ""
    parts = ["<h2>Golden-label metrics</h2>", _summary_table(metrics)]
    for m in metrics:
        if m.get("confusion"):
            parts.append(f"<h3>{esc(m['field'])}: per class</h3>{_class_table(m)}")
            parts.append(f"<h3>{esc(m['field'])}: confusion matrix</h3>{confusion_table(m['confusion'])}")
    return "".join(parts)


def _summary_table(metrics: list[dict[str, Any]]) -> str:
    rows = []
    for m in metrics:
        headline = {k: v for k, v in (m.get("metrics") or {}).items() if "." not in k}
        figures = ", ".join(f"{k} {rounded(v)}" for k, v in headline.items()) or NOTHING
        rows.append(
            f"<tr><td>{esc(m['field'])}</td><td>{esc(m.get('column'))}</td><td>{esc(m.get('kind'))}</td>"
            f"<td class=n data-metric='{esc(m['field'])}'>{esc(figures)}</td>"
            f"<td class=n>{count(m.get('labelled'))}</td><td class=n>{count(m.get('unanswered'))}</td></tr>"
        )
    head = (
        "<tr><th>field</th><th>labels from</th><th>kind</th><th>metrics</th><th>rows compared</th>"
        "<th>unanswered</th></tr>"
    )
    return f"<table class=metrics>{head}{''.join(rows)}</table>"


def per_class(metric: dict[str, Any]) -> list[tuple[str, float, float, float, int]]:
    """(class, precision, recall, F1, support: rows labelled so) of an enum field's metrics."""
    values = metric.get("metrics") or {}
    classes = sorted({k.split(".", 1)[1] for k in values if k.startswith("precision.")})
    support: dict[str, int] = {}
    for cell in metric.get("confusion") or []:
        support[cell["expected"]] = support.get(cell["expected"], 0) + int(cell["rows"])
    return [
        (
            c,
            values.get(f"precision.{c}", 0.0),
            values.get(f"recall.{c}", 0.0),
            values.get(f"f1.{c}", 0.0),
            support.get(c, 0),
        )
        for c in classes
    ]


def _class_table(metric: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr><td>{esc(c)}</td><td class=n>{rounded(p)}</td><td class=n>{rounded(r)}</td>"
        f"<td class=n>{rounded(f)}</td><td class=n>{count(n)}</td></tr>"
        for c, p, r, f, n in per_class(metric)
    )
    return f"<table><tr><th>class</th><th>precision</th><th>recall</th><th>F1</th><th>support</th></tr>{rows}</table>"


def confusion_table(cells: list[dict[str, Any]]) -> str:
    """Rows: the label; columns: the answer; the diagonal (agreement) marked."""
    expected = sorted({c["expected"] for c in cells})
    answered = sorted({c["answered"] for c in cells} | set(expected))
    grid = {(c["expected"], c["answered"]): int(c["rows"]) for c in cells}
    head = "<tr><th>label \\ answer</th>" + "".join(f"<th>{esc(a or '(none)')}</th>" for a in answered) + "</tr>"
    body = "".join(
        f"<tr><th>{esc(e)}</th>"
        + "".join(f"<td class='n{' diag' if e == a else ''}'>{count(grid.get((e, a), 0))}</td>" for a in answered)
        + "</tr>"
        for e in expected
    )
    return f"<table class=confusion>{head}{body}</table>"


def distribution_section(profile: dict[str, Any] | None) -> str:
    """A horizontal bar per answer value of each enum/boolean field (CSS bars, no script)."""
    found = (profile or {}).get("distributions") or []
    if not found:
        return ""
    parts = ["<h2>Answer values</h2>"]
    for d in found:
        total = sum(c["rows"] for c in d["counts"]) or 1
        top = max(c["rows"] for c in d["counts"]) or 1
        bars = "".join(
            f"<div class=bar><span class=label>{esc(c['value'])}</span>"
            f"<span class=fill style='width:{BAR_WIDTH * c['rows'] / top:.0f}px'></span>"
            f"<span class=n>{count(c['rows'])} ({100 * c['rows'] / total:.1f} %)</span></div>"
            for c in d["counts"]
        )
        parts.append(
            f"<h3>{esc(d['step'])}.{esc(d['field'])}</h3><div class=chart data-field='{esc(d['field'])}'>{bars}</div>"
        )
    return "".join(parts)


def samples_section(samples: list[dict[str, Any]], seed: int | None) -> str:
    if not samples:
        return "<h2>Sample answers</h2><p class=muted>no answers yet</p>"
    drawn = f" (drawn at random with seed {seed}, then one per class, then failed rows)" if seed is not None else ""
    rows = "".join(
        f"<tr><td>{esc(s['step'])}</td><td><code>{esc(s['row_key'])}</code><br>"
        f"<span class=muted>{esc(s.get('why'))}</span></td>"
        f"<td>{key_values(s.get('input'))}</td><td>{_answer_cell(s)}"
        + (
            f"<details><summary>prompt as sent</summary><pre>{esc(s['prompt'])}</pre></details>"
            if s.get("prompt")
            else ""
        )
        + "</td></tr>"
        for s in samples
    )
    return (
        f"<h2>Sample answers</h2><p class=muted>{esc(drawn)}</p>"
        f"<table class=samples><tr><th>step</th><th>row</th><th>input</th><th>answer</th></tr>{rows}</table>"
    )


def _answer_cell(sample: dict[str, Any]) -> str:
    """The answer, or for a failed row its error code and message."""
    if sample.get("error_code"):
        return f"<p class=bad>failed: <code>{esc(sample['error_code'])}</code></p><pre>{esc(sample.get('error'))}</pre>"
    return f"<pre>{esc(_pretty(sample.get('answer')))}</pre>"


def key_values(value: Any) -> str:
    """An input row as a definition list (column, value), long values cut."""
    if not isinstance(value, dict):
        return f"<pre>{esc(_pretty(value))}</pre>"
    items = "".join(f"<dt>{esc(k)}</dt><dd>{esc(_cut(v))}</dd>" for k, v in value.items())
    return f"<dl class=kv>{items}</dl>"


def _cut(value: Any, chars: int = 400) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= chars else text[:chars] + " ..."


def _pretty(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=1, ensure_ascii=False, default=str)


def flagged_section(profile: dict[str, Any] | None) -> str:
    found = (profile or {}).get("flagged") or []
    if not found:
        return ""
    parts = ["<h2>Flagged answers</h2>"]
    for f in found:
        parts.append(f"<h3 class=warn>{esc(f['step'])}: {count(f['rows'])} empty or suspicious answer(s)</h3><ul>")
        parts += [
            f"<li><code>{esc(e['row_key'])}</code> ({esc(e['reason'])}): <q>{esc(_cut(e['answer'], 200))}</q></li>"
            for e in f["examples"]
        ]
        parts.append("</ul>")
    return "".join(parts)


CSS = """
.diag{background:#e3f4e8;font-weight:600}table.confusion td,table.confusion th{text-align:center}
.chart{background:#fff;border:1px solid #e3e6eb;padding:8px;margin:4px 0}
.bar{display:flex;align-items:center;gap:8px;margin:2px 0}.bar .label{width:160px;text-align:right}
.bar .fill{display:inline-block;height:14px;background:#3867d6}
dl.kv{margin:0;display:grid;grid-template-columns:max-content 1fr;gap:2px 10px}
dl.kv dt{font-weight:600;color:#5b6475}dl.kv dd{margin:0;word-break:break-word}
"""
