"""The one-line summary both report formats open with."""

from __future__ import annotations

from typing import Any

from batchor.humanize import count, duration, elapsed, money


def headline(report: dict[str, Any]) -> str:
    """`succeeded: 11 of 12 rows answered, 1 failed; spend $0.0017 of budget $1.00; took 3.2s`."""
    run, plan = report["run"], report.get("plan") or {}
    rows = (plan.get("totals") or {}).get("rows") or run.get("requests")
    spend = (run.get("spend") or {}).get("total_usd") or run.get("cost_usd") or 0.0
    budget = plan.get("budget_usd")
    took = elapsed(run.get("started_at"), run.get("finished_at"))
    return (f"{run.get('status')}: {count(run.get('succeeded'))} of {count(rows)} rows answered, "
            f"{count(run.get('failed'))} failed; spend {money(spend)}"
            + (f" of budget {money(budget)}" if budget is not None else "")
            + (f"; took {duration(took)}" if took is not None else "; not finished"))
