"""Engine events: the engine never prints, it emits these; the CLI or a callback renders them."""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable


@dataclass
class Event:
    type: str
    data: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.type, "at": round(self.at, 3), **self.data}


EventSink = Callable[[Event], None]


def ignore(_: Event) -> None:
    """The default sink: drop events."""


log = logging.getLogger("batchor.engine")
# Events worth a line at INFO (`-v`): what changes the run's course. The rest go to DEBUG (`-vv`).
# None is a warning: the run reports its troubles itself, and a library must not print unasked.
_INFO_EVENTS = frozenset(
    {
        "run_started",
        "run_finished",
        "step_started",
        "step_finished",
        "batch_submitted",
        "batch_reattached",
        "batch_found_late",
        "batch_collected",
        "worker_joined",
        "provider_call_retry",
        "batch_call_failed",
        "batch_create_failed",
        "batch_file_kept",
        "paused",
    }
)


def log_event(event: Event) -> None:
    """Every event as a log record of `batchor.engine`, at a level that says how much it matters."""
    level = logging.INFO if event.type in _INFO_EVENTS else logging.DEBUG
    if log.isEnabledFor(level):
        details = " ".join(f"{k}={v}" for k, v in event.data.items() if not isinstance(v, (dict, list)))
        log.log(level, "%s %s", event.type, details)


def logged(sink: EventSink | None) -> EventSink:
    """`sink` that also logs each event (the API and the CLI hand the engine this)."""

    def both(event: Event) -> None:
        log_event(event)
        if sink is not None:
            sink(event)

    return both


@dataclass
class Progress:
    """Counters a progress display needs, updated by the engine and sent with `progress` events."""

    total: int = 0
    done: int = 0
    succeeded: int = 0
    failed: int = 0
    cached: int = 0
    skipped: int = 0
    retries: int = 0
    rate_limited: int = 0
    in_flight: int = 0
    cost_usd: float = 0.0  # every billed attempt, accepted or not
    wasted_usd: float = 0.0  # of which attempts whose answer was rejected (invalid, truncated, refused)
    estimated_usd: float = 0.0  # of which priced without usage from the provider (an estimate)
    input_tokens: int = 0
    output_tokens: int = 0
    # per step: done, succeeded, failed, cost_usd (what a live view shows a line for)
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    def step(self, name: str | None) -> dict[str, Any]:
        """The counters of one step (a throwaway dict when the step is not known)."""
        if name is None:
            return {"done": 0, "succeeded": 0, "failed": 0, "cost_usd": 0.0}
        return self.steps.setdefault(name, {"done": 0, "succeeded": 0, "failed": 0, "cost_usd": 0.0})

    def add_spend(
        self,
        cost: float,
        input_tokens: int,
        output_tokens: int,
        *,
        wasted: bool,
        estimated: bool,
        step: str | None = None,
    ) -> None:
        """One billed attempt (realtime or batch) in the running totals."""
        self.step(step)["cost_usd"] += cost
        self.cost_usd += cost
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        if wasted:
            self.wasted_usd += cost
        if estimated:
            self.estimated_usd += cost

    def count_success(self, step: str | None = None) -> None:
        """One answered request."""
        self.succeeded += 1
        self._count_done(step, "succeeded")

    def count_failure(self, step: str | None = None) -> None:
        """One request failed for good."""
        self.failed += 1
        self._count_done(step, "failed")

    def _count_done(self, step: str | None, outcome: str) -> None:
        self.done += 1
        counters = self.step(step)
        counters["done"] += 1
        counters[outcome] += 1

    def snapshot(self) -> dict[str, Any]:
        data = asdict(self)
        elapsed = max(time.monotonic() - data.pop("started"), 1e-9)
        data["elapsed_s"] = round(elapsed, 3)
        data["rate_per_s"] = round(self.done / elapsed, 1)
        data["cost_usd"] = round(self.cost_usd, 6)
        for name in ("wasted_usd", "estimated_usd"):  # Result reads these: exact to a micro-cent
            data[name] = round(data[name], 12)
        return data
