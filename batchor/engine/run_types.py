"""What an apply takes and what it gives back: the run's options and its outcome.

Kept apart from the run itself (engine/run.py) so the Python API, the pilot and the CLI can name
them without loading the engine's executors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from batchor.engine.budget import CLI_SOURCE
from batchor.engine.events import EventSink, ignore
from batchor.errors import OutputError
from batchor.state.base import RunStatus


@dataclass
class ApplyOptions:
    max_cost: float | None = None
    max_cost_source: str = CLI_SOURCE  # where the budget comes from (see budget.effective_max_cost)
    carried: float = 0.0  # what the job's unfinished earlier runs spent: it counts against the budget
    refresh: frozenset[str] = frozenset()
    retry_failed: bool = False  # also send requests that failed for good earlier (deterministic errors)
    emit: EventSink = ignore
    output_path: Path | None = None
    handle_signals: bool = True
    seed: int | None = None
    limits: dict[str, Any] = field(default_factory=dict)  # overrides of the plan's limits
    wait: bool = True  # False: submit batch work and return (apply --no-wait)
    sleep: Any = None  # injected async sleep for batch polling (tests); None: real time
    clock: Any = None  # injected epoch clock for batch ages (tests, with `sleep`); None: time.time
    run_kind: str = "apply"  # what the run's answers are in the estimate's history: apply | pilot
    max_calls: int | None = None  # the most attempts this run may send, re-asks included (a pilot's allowance)
    force: bool = False  # the spec's output may replace a file batchor did not write (outputs/written.py)
    row_events: bool = False  # emit `row_finished` per finished row (apply --json, on_row)


@dataclass
class RunOutcome:
    run_id: str
    status: RunStatus
    stop_reason: str | None
    progress: dict[str, Any]
    output_path: str | None
    cost_usd: float
    duration_s: float
    cached: int
    skipped: int
    requests: int
    steps: list[dict[str, Any]] = field(default_factory=list)  # per step: the plan's estimate next to the spend
    output_error: OutputError | None = None  # the rows were judged and recorded, but the file was not written
