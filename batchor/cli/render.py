"""Live rendering of engine events: NDJSON (--json) or a rich progress bar on a TTY."""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from batchor.engine.events import Event
from batchor.plan.summary import money, plan_dict, plan_markdown, plan_text, shared_rows

__all__ = ["EventPrinter", "money", "plan_dict", "plan_markdown", "plan_text", "run_summary"]


class EventPrinter:
    """NDJSON events on stdout (--json) or a rich progress bar on a TTY; quiet otherwise."""

    def __init__(self, as_json: bool, stream: TextIO | None = None) -> None:
        self.as_json = as_json
        self.stream = stream or sys.stdout
        self._progress: Any = None
        self._task: Any = None

    def __call__(self, event: Event) -> None:
        if self.as_json:
            self.stream.write(json.dumps(event.to_dict(), default=str) + "\n")
            self.stream.flush()
            return
        if not sys.stderr.isatty():
            return
        self._rich(event)

    def _rich(self, event: Event) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        if event.type == "progress":
            d = event.data
            if self._progress is None:
                self._progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                                          TextColumn("{task.completed:,}/{task.total:,}"),
                                          TextColumn("{task.fields[info]}"), TimeElapsedColumn(), transient=True)
                self._progress.start()
                self._task = self._progress.add_task("requests", total=d["total"] or 1, info="")
            info = f"failed {d['failed']}  ${d['cost_usd']:.4f}  {d['rate_per_s']}/s"
            self._progress.update(self._task, completed=d["done"], total=max(d["total"], 1), info=info)
        elif event.type == "run_finished":
            self.close()

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def spend_lines(spend: dict[str, Any], failed: dict[str, dict[str, Any]]) -> str:
    """`status`: spend from the ledger of attempts, accepted vs wasted, and what failed rows cost."""
    approx = "~" if spend["estimated_usd"] else ""
    lines = [f"spend          {approx}{money(spend['total_usd'])}: {money(spend['accepted_usd'])} accepted, "
             f"{money(spend['wasted_usd'])} wasted on {spend['attempts_rejected']:,} rejected attempt(s) "
             f"({spend['attempts_billed']:,} billed)"]
    if spend["estimated_usd"]:
        lines.append(f"  estimated    {money(spend['estimated_usd'])} of it: the provider reported no usage, so tokens "
                     "and cost are estimated")
    lines += [f"  failed       {reason}: {f['rows']:,} row(s) cost {money(f['cost_usd'])}"
              for reason, f in failed.items()]
    return "\n".join(lines)


def spend_cell(spend: dict[str, Any], cost: float) -> str:
    """`runs`: the run's cost, ~ when estimated, with its wasted share."""
    total = spend["total_usd"] or cost  # runs recorded before the ledger: their own figure
    text = ("~" if spend["estimated_usd"] else "") + money(total)
    return text + (f" ({money(spend['wasted_usd'])} wasted)" if spend["wasted_usd"] else "")


def run_summary(outcome: Any, plan: Any) -> str:
    """The line `apply` ends with. Rows and requests are different units: rows with identical
    texts share one request, so the quickstart's 300 rows are 276 requests."""
    p, rows, shared = outcome.progress, plan.header.totals.rows, shared_rows(plan)
    sharing = f", {shared:,} rows share an answer" if shared else ""
    return (f"{outcome.status}: {rows:,} rows: {outcome.requests:,} requests{sharing}; {p['succeeded']:,} answered, "
            f"{p['failed']:,} failed; {outcome.cached:,} rows cached, {outcome.skipped:,} skipped; "
            f"cost {money(outcome.cost_usd)}; {outcome.duration_s:.1f}s; output {outcome.output_path}")


def batch_lines(batches: list[dict[str, Any]]) -> str:
    """One line per provider batch (for `status` and `cancel`)."""
    lines = [f"batches        {len(batches)}"]
    for b in batches:
        done = f"{b.get('succeeded') or 0} ok, {b.get('failed') or 0} failed, {b.get('requeued') or 0} requeued"
        error = f"  error: {b['error']}" if b.get("error") else ""
        lines.append(f"  {b['batch_id']}  {b['step']}#{b['chunk']}  {b['provider']}  {b['state']:10} "
                     f"{b.get('remote_status') or '-':12} {b['requests']:>7} rows  {done}  {b.get('remote_id') or '-'}"
                     f"{error}")
    return "\n".join(lines)
