"""Live rendering of engine events: NDJSON (--json) or the live view on a TTY; the run summary line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from batchor.cli.basics import is_quiet
from batchor.humanize import plural
from batchor.lazy import Deferred

if TYPE_CHECKING:
    from batchor import api
    from batchor.api import Event, Plan
    from batchor.report.live import LiveView
else:  # loaded when a plan is printed (start-up of every command)
    api = Deferred("batchor.api")

__all__ = ["EventPrinter", "money", "plan_dict", "plan_markdown", "plan_text", "run_summary"]


class EventPrinter:
    """NDJSON events on stdout (--json), or the live view (batchor/report/live.py) on a terminal;
    quiet otherwise (a pipe, a file, CI, or -q)."""

    def __init__(
        self, as_json: bool, stream: TextIO | None = None, plan: Any = None, max_cost: float | None = None
    ) -> None:
        self.as_json = as_json
        self.stream = stream or sys.stdout
        self._view: LiveView | None = None
        if not as_json and not is_quiet() and sys.stderr.isatty():
            from batchor.report.live import LiveView  # the report package loads DuckDB: only here

            self._view = LiveView(plan, max_cost)

    def __call__(self, event: Event) -> None:
        if self.as_json:
            self.stream.write(json.dumps(event.to_dict(), default=str) + "\n")
            self.stream.flush()
        elif self._view is not None:
            self._view(event)

    def close(self) -> None:
        if self._view is not None:
            self._view.close()


def run_summary(outcome: Any, plan: Any) -> str:
    """The line `apply` ends with. Rows and requests are different units, each named: rows with
    identical texts share one request, so the quickstart's 300 rows are 276 requests; the rows'
    outcomes are the output file's `_status`."""
    p, shared = outcome.progress, api.shared_rows(plan)
    sharing = f", {plural(shared, 'row', 'share')} an answer" if shared else ""
    rows = p.get("rows") or {}
    ended = ", ".join(f"{rows[s]:,} {s}" for s in ("succeeded", "failed", "pending", "skipped") if rows.get(s))
    total = sum(rows.values()) if rows else plan.header.totals.rows
    return (
        f"{outcome.status}: {plural(total, 'row')}: {plural(outcome.requests, 'request')}{sharing}; "
        f"requests {p['succeeded']:,} "
        f"answered, {p['failed']:,} failed; rows {ended or 'none'}; {plural(outcome.cached, 'row')} cached, "
        f"{outcome.skipped:,} skipped; cost {api.money(outcome.cost_usd)}; {outcome.duration_s:.1f}s; "
        f"output {outcome.output_path}"
    )


def money(value: float) -> str:
    """The plan's money: 4 decimals under a dollar (batchor.api.money)."""
    return api.money(value)


def plan_dict(plan: Plan) -> dict[str, Any]:
    """The plan as `plan --json` prints it."""
    return api.plan_dict(plan)


def plan_markdown(plan: Plan) -> str:
    """The plan as `plan --format markdown` prints it."""
    return api.plan_markdown(plan)


def plan_text(plan: Plan, max_cost: float | None = None, output: str | Path | None = None) -> str:
    """The plan as `plan` prints it on a terminal."""
    return api.plan_text(plan, max_cost, output)
