"""What a step's batch lane needs from the wave's batch run, and nothing more.

A lane (engine/batch_lane.py) submits, polls and collects one step's batches. It reads the run's
identity, writes through the batch ledger and the result sink, reserves and settles against the
budget, and reports through events; the executor (engine/batch.py) builds this context once per
wave and hands it to every lane, so a lane never reaches back into the executor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from batchor.engine.batch_poll import PollPace
from batchor.engine.budget import Budget
from batchor.engine.events import Event, EventSink, Progress
from batchor.engine.limits import RunLimits
from batchor.engine.sink import ResultSink
from batchor.engine.types import StopSignal
from batchor.state.base import StateStore
from batchor.state.batches import BatchLedger


@dataclass(frozen=True)
class BatchContext:
    job_id: str
    run_id: str
    store: StateStore
    ledger: BatchLedger  # the batches' durable record (intents, submits, collects)
    sink: ResultSink  # the answers, flushed once per collected batch
    progress: Progress
    budget: Budget
    limits: RunLimits
    stop: StopSignal
    emit: EventSink
    clock: Callable[[], float]  # epoch seconds: batch ages and due times (injected by tests)
    pace: PollPace  # how soon each live batch is polled again
    token_room: Callable[[str], int | None]  # input tokens a model may still enqueue (None: no limit)

    def report(self) -> None:
        self.emit(Event("progress", self.progress.snapshot()))
