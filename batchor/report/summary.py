"""The one-line summary both report formats open with."""

from __future__ import annotations

from typing import Any

from batchor.humanize import cache_fees, cache_saving, count, duration, elapsed, money
from batchor.state.answer_stats import report_totals


def headline(report: dict[str, Any]) -> str:
    """`partial: 11 of 12 rows succeeded, 1 failed; spend $0.0017 of budget $1.00; took 3.2s`: the
    output's rows when the run ended, or, where the run did not keep them, its requests."""
    run, plan = report["run"], report.get("plan") or {}
    spend = (run.get("spend") or {}).get("total_usd") or run.get("cost_usd") or 0.0
    budget = plan.get("budget_usd")
    took = elapsed(run.get("started_at"), run.get("finished_at"))
    return (
        f"{run.get('status')}: {_counts(run, plan)}; spend {money(spend)}"
        + (f" of budget {money(budget)}" if budget is not None else "")
        + cache_fees(run.get("spend") or {})
        + cache_saving((run.get("spend") or {}).get("cache_saved_usd"))
        + _versus_plan(run)
        + (f"; took {duration(took)}" if took is not None else "; not finished")
    )


def _versus_plan(run: dict[str, Any]) -> str:
    """'; 0.48x the plan's expected $0.0046 for the 33 of 60 requests it settled': the spend against the
    estimate of the part the run got through (state/answer_stats.run_step_report), as `status` says."""
    totals = report_totals(run.get("steps") or [])
    if totals["ratio"] is None:
        return ""
    settled, requests = totals["settled_requests"], totals["requests"]
    part = f" for the {count(settled)} of {count(requests)} requests it settled" if settled < requests else ""
    return f"; {totals['ratio']:.2f}x the plan's expected {money(totals['settled_expected_usd'])}{part}"


def _counts(run: dict[str, Any], plan: dict[str, Any]) -> str:
    rows = run.get("rows")
    if rows:
        pending = f", {count(rows['pending'])} pending" if rows["pending"] else ""
        return (
            f"{count(rows['succeeded'])} of {count(sum(rows.values()))} rows succeeded, "
            f"{count(rows['failed'])} failed{pending}"
        )
    return (
        f"{count(run.get('succeeded'))} of {count(run.get('requests'))} requests answered, "
        f"{count(run.get('failed'))} failed"
    )
