"""Live rendering of engine events: NDJSON (--json) or a rich progress bar on a TTY."""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from batchor.cli.basics import is_quiet
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
        if not sys.stderr.isatty() or is_quiet():
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


def run_summary(outcome: Any, plan: Any) -> str:
    """The line `apply` ends with. Rows and requests are different units: rows with identical
    texts share one request, so the quickstart's 300 rows are 276 requests."""
    p, rows, shared = outcome.progress, plan.header.totals.rows, shared_rows(plan)
    sharing = f", {shared:,} rows share an answer" if shared else ""
    return (f"{outcome.status}: {rows:,} rows: {outcome.requests:,} requests{sharing}; {p['succeeded']:,} answered, "
            f"{p['failed']:,} failed; {outcome.cached:,} rows cached, {outcome.skipped:,} skipped; "
            f"cost {money(outcome.cost_usd)}; {outcome.duration_s:.1f}s; output {outcome.output_path}")
