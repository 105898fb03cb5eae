"""The live view of a run: one line per step (done / total from the plan, failures, spend, rate,
ETA), each provider batch with its state, age and the next poll, and what holds the run up.

It is an event sink: the engine's events drive it, in the CLI (on a terminal) and in notebooks
(`batchor.apply(..., progress=True)`). When the run ends the last frame stays as the summary.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from batchor.engine.events import Event
from batchor.humanize import NOTHING, count, duration, money

_NOTICES = {
    "provider_call_retry",
    "batch_call_failed",
    "batch_create_failed",
    "waiting_for_workers",
    "disk_full_waiting",
}


def wanted(stream: Any = None) -> bool:
    """Whether a live view helps: a terminal, or a notebook."""
    target = stream or sys.stderr
    return bool(getattr(target, "isatty", lambda: False)()) or Console().is_jupyter


class LiveView:
    """Renders engine events as a live table; call `close()` when the run is over."""

    def __init__(
        self,
        plan: Any = None,
        max_cost: float | None = None,
        console: Console | None = None,
        clock: Any = time.monotonic,
    ) -> None:
        self.clock, self.max_cost = clock, max_cost
        self.steps: dict[str, dict[str, Any]] = {}
        for step in getattr(getattr(plan, "header", None), "steps", []):
            self.steps[step.name] = {
                "total": step.counts.to_run,
                "projected": step.counts.projected,
                "done": 0,
                "failed": 0,
                "cost_usd": 0.0,
                "started": None,
            }
        self.batches: dict[str, dict[str, Any]] = {}
        self.totals: dict[str, Any] = {}
        self.next_poll: float | None = None
        self.notice: str | None = None
        self.finished: dict[str, Any] | None = None
        self.live = Live(
            console=console or Console(stderr=True),
            auto_refresh=True,
            refresh_per_second=4,
            transient=False,
            get_renderable=self.render,
        )
        self._started = False

    def __call__(self, event: Event) -> None:
        handler = getattr(self, f"_on_{event.type}", None)
        if handler is not None:
            handler(event.data)
        elif event.type in _NOTICES:
            self.notice = f"{event.type.replace('_', ' ')}: " + ", ".join(
                f"{k} {v}" for k, v in event.data.items() if not isinstance(v, (dict, list))
            )
        if not self._started:
            self.live.start()
            self._started = True
        if event.type == "run_finished":
            self.close()

    def _step(self, name: str) -> dict[str, Any]:
        return self.steps.setdefault(
            name, {"total": 0, "projected": 0, "done": 0, "failed": 0, "cost_usd": 0.0, "started": None}
        )

    def _on_step_started(self, data: dict[str, Any]) -> None:
        step = self._step(data["step"])
        step["started"] = step["started"] or self.clock()
        if "pending" in data and not step["total"]:  # a step the plan could not count ahead
            step["total"] = data["pending"]

    def _on_progress(self, data: dict[str, Any]) -> None:
        self.totals = data
        for name, counters in (data.get("steps") or {}).items():
            step = self._step(name)
            step.update({k: counters[k] for k in ("done", "failed", "cost_usd")})
            step["started"] = step["started"] or self.clock()

    def _on_batch_submitted(self, data: dict[str, Any]) -> None:
        self.batches[data["batch_id"]] = {
            "step": data["step"],
            "status": "submitted",
            "requests": data["requests"],
            "since": self.clock(),
            "outcomes": None,
        }

    _on_batch_reattached = _on_batch_submitted

    def _on_batch_polled(self, data: dict[str, Any]) -> None:
        batch = self.batches.setdefault(
            data["batch_id"], {"step": data["step"], "requests": data["requests"], "since": None, "outcomes": None}
        )
        batch["status"] = data["remote_status"]

    def _on_batch_collected(self, data: dict[str, Any]) -> None:
        batch = self.batches.setdefault(data["batch_id"], {"step": data["step"], "requests": None, "since": None})
        batch.update(status=f"collected ({data.get('state')})", outcomes=data.get("outcomes"), ended=self.clock())

    def _on_batch_waiting(self, data: dict[str, Any]) -> None:
        self.next_poll = self.clock() + float(data.get("next_poll_s") or 0)

    def _on_run_finished(self, data: dict[str, Any]) -> None:
        self.finished = data
        self.next_poll = None

    def render(self) -> Group:
        parts: list[Any] = [self._steps_table()]
        if self.batches:
            parts.append(self._batches_table())
        for line in self._status_lines():
            parts.append(line)
        return Group(*parts)

    def _steps_table(self) -> Table:
        title = "run finished: " + str(self.finished.get("status")) if self.finished else "running"
        table = Table(title=title, title_justify="left", box=None, padding=(0, 1), pad_edge=False)
        for name in ("step", "done / total", "failed", "spend", "rate", "ETA"):
            table.add_column(name, justify="left" if name == "step" else "right", no_wrap=True)
        now = self.clock()
        for name, s in self.steps.items():
            total = f"{count(s['total'])}" + (f" + {count(s['projected'])} projected" if s["projected"] else "")
            rate, eta = self._pace(s, now)
            table.add_row(
                escape(name), f"{count(s['done'])} / {total}", count(s["failed"]), money(s["cost_usd"]), rate, eta
            )
        return table

    def _pace(self, step: dict[str, Any], now: float) -> tuple[str, str]:
        if not step["started"] or not step["done"]:
            return NOTHING, NOTHING
        per_s = step["done"] / max(now - step["started"], 1e-6)
        left = max(step["total"] + step["projected"] - step["done"], 0)
        return f"{per_s:,.1f}/s", ("done" if not left else duration(left / per_s))

    def _batches_table(self) -> Table:
        table = Table(title="batches", title_justify="left", box=None, padding=(0, 1), pad_edge=False)
        for name in ("batch", "step", "provider state", "rows", "since submit", "outcomes"):
            table.add_column(name, no_wrap=True)
        now = self.clock()
        for batch_id, b in self.batches.items():
            since = duration((b.get("ended") or now) - b["since"]) if b.get("since") else NOTHING
            outcomes = ", ".join(f"{k} {v}" for k, v in (b.get("outcomes") or {}).items()) or NOTHING
            table.add_row(
                escape(batch_id),
                escape(b["step"]),
                escape(str(b.get("status"))),
                count(b.get("requests")),
                since,
                escape(outcomes),
            )
        return table

    def _status_lines(self) -> list[str]:
        t, lines = self.totals, []
        spend = money(t.get("cost_usd", 0.0))
        budget = f" of budget {money(self.max_cost)}" if self.max_cost is not None else ""
        lines.append(
            f"spend {spend}{budget}; {count(t.get('in_flight', 0))} in flight, "
            f"{count(t.get('cached', 0))} cached, {count(t.get('skipped', 0))} skipped"
        )
        if self.next_poll is not None:
            lines.append(f"next poll in {duration(max(self.next_poll - self.clock(), 0))}")
        if t.get("rate_limited"):
            lines.append(f"[yellow]paused by rate limits {count(t['rate_limited'])} time(s)[/yellow]")
        if self.notice:
            lines.append(f"[yellow]{escape(self.notice)}[/yellow]")
        if self.finished and self.finished.get("reason"):
            lines.append(f"stopped: {escape(str(self.finished['reason']))}")
        return lines

    def close(self) -> None:
        """Stop refreshing; the last frame stays on screen as the run's summary."""
        if self._started:
            self.live.refresh()
            self.live.stop()
            self._started = False
