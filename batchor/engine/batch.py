"""Batch execution: a step's requests go through the provider's Batch API, durably.

Per step: re-attach to the live batches of its request family (reconciling unresolved creates
with the provider), cut the other pending keys into chunks within the provider's limits, record
each chunk as an intent *before* creating it, then poll every live batch (one call each per
round, at the pace of engine/batch_poll.py: soon after a submit, then following each batch's age
and reported progress; batches of an earlier apply are polled at once) and collect finished
ones: answers are stored, rows without an answer are queued again. With `wait=False` the executor returns once
all it may submit is submitted; a later apply collects. A realtime step gets a lane too when rows
of it sit in live batches (`batch_handover`): that lane only collects, it never submits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from batchor.engine.batch_calls import RetryingCalls
from batchor.engine.batch_context import BatchContext
from batchor.engine.batch_lane import Lane
from batchor.engine.batch_poll import PollPace
from batchor.engine.budget import Budget
from batchor.engine.events import Event, EventSink, Progress
from batchor.engine.limits import RunLimits
from batchor.engine.sink import ResultSink
from batchor.engine.types import StepRuntime, StopSignal
from batchor.engine.work import StepWork
from batchor.providers.base import CacheFeeSink, HoldsCaches, ProviderConfig
from batchor.providers.batch import (
    BatchProvider,
    capped,
    create_batch_provider,
)
from batchor.state.base import StateStore
from batchor.state.batches import BatchLedger

Sleep = Callable[[float], Awaitable[None]]
ReadyClient = Callable[[str], BatchProvider | None]


def connection_of(runtime: StepRuntime) -> dict[str, Any]:
    """How to reach the provider (stored with each batch, so `cancel` can too): never a key."""
    plan = runtime.plan
    return {
        "base_url": plan.base_url,
        "api_key_env": plan.api_key_env,
        "api": plan.api or "chat",
        "strict": plan.strict,
        "options": plan.provider_options,
    }


def batch_provider_for(provider: str, connection: dict[str, Any], timeout_s: float) -> BatchProvider:
    """The batch adapter with the realtime client's settings (spec `model.options` included)."""
    options = {
        **(connection.get("options") or {}),
        "api": connection.get("api") or "chat",
        "strict": connection.get("strict"),
    }
    config = ProviderConfig(
        provider=provider,
        base_url=connection.get("base_url"),
        api_key_env=connection.get("api_key_env"),
        timeout_s=timeout_s,
        options=options,
    )
    return create_batch_provider(config)


@dataclass
class BatchOptions:
    wait: bool = True
    sleep: Sleep | None = None  # injected by tests: polling then takes no real time
    clock: Callable[[], float] = time.time
    fees: CacheFeeSink | None = None  # where adapters that hold caches report them (engine/cache_fees.py)


class BatchExecutor:
    """Runs the batch-mode steps of one wave until their batches are collected (or submitted)."""

    def __init__(
        self,
        steps: dict[str, StepRuntime],
        *,
        store: StateStore,
        run_id: str,
        job_id: str,
        limits: RunLimits,
        budget: Budget,
        sink: ResultSink,
        progress: Progress,
        emit: EventSink,
        stop: StopSignal,
        options: BatchOptions,
        ready: ReadyClient = lambda step: None,
    ) -> None:
        self.steps, self.store, self.run_id, self.job_id = steps, store, run_id, job_id
        self.ready = ready  # a batch client built ahead for a step (engine/clients.py), else None
        self.ledger = BatchLedger(store)
        self.limits, self.budget, self.sink, self.progress = limits, budget, sink, progress
        self.emit, self.stop, self.options = emit, stop, options
        self.pace = PollPace(limits.batch_poll_s, limits.batch_poll_max_s)
        self.enqueued_tokens = limits.batch_enqueued_tokens
        self.lanes: list[Lane] = []
        self.context = BatchContext(
            job_id=job_id,
            run_id=run_id,
            store=store,
            ledger=self.ledger,
            sink=sink,
            progress=progress,
            budget=budget,
            limits=limits,
            stop=stop,
            emit=emit,
            clock=options.clock,
            pace=self.pace,
            token_room=self.token_room,
        )

    async def run(self, works: list[StepWork]) -> int:
        """Returns the number of batches still live (in flight) when it stops."""
        try:
            with self.store.session():  # the lanes' ledger reads: one attach of the state, not five a step
                self.lanes = [self._open(work) for work in works]
            while True:
                await asyncio.gather(*(lane.submit_ready() for lane in self.lanes))  # steps side by side
                if self._interrupted() or not self.options.wait or not any(lane.active for lane in self.lanes):
                    break
                delay = self._next_poll_in()
                self.emit(
                    Event(
                        "batch_waiting",
                        {"live": sum(len(lane.live) for lane in self.lanes), "next_poll_s": round(delay, 3)},
                    )
                )
                await self._sleep(delay)
                if self._interrupted():
                    break
                now = self.options.clock()
                for lane in self.lanes:
                    await lane.poll_due(now)
        finally:
            await self.sink.flush()
            for lane in self.lanes:
                lane.hand_back()
                await lane.provider.aclose()
        return sum(len(lane.live) for lane in self.lanes)

    def _next_poll_in(self) -> float:
        """Seconds until the next round: when the soonest live batch is due (batch_poll.py)."""
        now = self.options.clock()
        soonest = min((lane.due_at(b, now) for lane in self.lanes for b in lane.active), default=now)
        return min(self.pace.poll_max_s, max(0.0, soonest - now))

    def _open(self, work: StepWork) -> Lane:
        runtime = self.steps[work.step.name]
        if runtime.plan.mode != "batch":  # a realtime step collecting earlier batches: batch rate
            runtime = replace(runtime, plan=runtime.plan.model_copy(update={"mode": "batch"}))
        connection = connection_of(runtime)
        timeout = self.limits.request_timeout_s
        provider = self.ready(work.step.name) or batch_provider_for(runtime.plan.provider, connection, timeout)
        provider.calls = RetryingCalls(self._sleep, self.emit)
        if self.options.fees is not None and isinstance(provider, HoldsCaches):  # Gemini's context caches
            provider.report_cache_fees(self.options.fees)
        provider.limits = capped(provider.limits, self.limits.batch_max_requests, self.limits.batch_max_bytes)
        lane = Lane(self.context, runtime, provider, connection)
        lane.open(work)
        return lane

    def token_room(self, model: str) -> int | None:
        """Input tokens that may still be enqueued for `model` (None: no limit set)."""
        if not self.enqueued_tokens:
            return None
        used = sum(
            b.input_tokens or 0 for lane in self.lanes if lane.runtime.plan.model == model for b in lane.live.values()
        )
        return int(self.enqueued_tokens) - used

    def _interrupted(self) -> bool:
        return self.stop.reason == "interrupted"

    async def _sleep(self, delay: float) -> None:
        if self.options.sleep is not None:
            await self.options.sleep(delay)
            return
        if self.stop.stopped:  # stopped for quota/budget: keep collecting what is in flight
            await asyncio.sleep(delay)
            return
        try:
            await asyncio.wait_for(self.stop.event.wait(), delay)
        except TimeoutError:
            pass

    def report(self) -> None:
        self.emit(Event("progress", self.progress.snapshot()))
