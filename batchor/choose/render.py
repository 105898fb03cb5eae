"""A comparison printed: a table per model and the verdict, as text or markdown."""

from __future__ import annotations

from batchor.choose.result import Comparison, ModelResult
from batchor.plan.summary import money

HEADERS = ("model", "sample cost", "full job (projected)", "checks", "golden labels", "agreement", "p50 latency")


def _cells(r: ModelResult, reference: str) -> tuple[str, ...]:
    metrics = ", ".join(f"{name} {value:.3g}" for name, value in _headline_metrics(r)) or "-"
    agreement = "reference" if r.model == reference else "-" if r.agreement is None else f"{r.agreement:.0%}"
    checks = f"{r.checks_passed}/{r.checks_total}" + ("" if r.passed else " FAIL")
    latency = "-" if r.latency_p50_ms is None else f"{r.latency_p50_ms:.0f} ms"
    projected = f"{money(r.projected)} ({money(r.projected_low)}-{money(r.projected_high)})"
    return (r.model, money(r.sample_cost), projected, checks, metrics, agreement, latency)


def _intro(c: Comparison) -> str:
    rehearsal = " (--mock: a rehearsal, the figures say nothing of the models)" if c.rehearsal else ""
    return (
        f"compare {c.spec}: {c.sample} sampled rows (seed {c.seed}) on {len(c.results)} models, "
        f"{money(c.spent)} spent now{rehearsal}"
    )


def comparison_text(c: Comparison) -> str:
    rows = [HEADERS, *(_cells(r, c.reference) for r in c.results)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADERS))]
    lines = [_intro(c)]
    lines += ["  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    lines += _failures(c) + [c.verdict()]
    return "\n".join(lines)


def comparison_markdown(c: Comparison) -> str:
    lines = [f"**{_intro(c)}**", "", "| " + " | ".join(HEADERS) + " |", "|---|---:|---:|---|---|---:|---:|"]
    lines += ["| " + " | ".join(_cells(r, c.reference)) + " |" for r in c.results]
    return "\n".join([*lines, "", *_failures(c), f"**{c.verdict()}**"]) + "\n"


def _failures(c: Comparison) -> list[str]:
    return [f"  {r.model}: failed {', '.join(r.failed_checks)}" for r in c.results if r.failed_checks]


def _headline_metrics(r: ModelResult) -> list[tuple[str, float]]:
    """The metrics of each field without their per-class breakdown (`f1.positive`: in --json)."""
    return [(name, value) for name, value in sorted(r.metrics.items()) if name.count(".") == 2]
