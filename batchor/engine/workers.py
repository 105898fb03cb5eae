"""Several workers on one run (PostgreSQL state): claims, lease heartbeats, a shared rate limit.

Each `apply` on a shared state joins the job's live run as a worker. Per wave, every worker scans
the steps as usual; the first one adds the pending keys to the run's work items (the others find
them there). Each then claims slices of them in plan order and feeds only its claimed requests to
the executors, parsing the messages of those rows only; a heartbeat thread renews its lease
meanwhile. When nothing is left to claim it waits while other live workers hold claims
(their leases may still expire, and then it takes their items over), so the next wave only starts
once every answer of this one is stored. Answers are committed in small groups (every
`concurrency` answers or 0.1 s, whichever comes first), each group with its attempts and the
closing of its work items in one transaction. A worker that dies loses its requests in flight and
the answers not committed yet, usually those of its last 0.1 s: other workers ask them again once
its lease passes, so they are paid twice. At worst (the database stalled at that moment) that is
the group being committed and the one filling meanwhile: 8 x concurrency answers (each group
holds fewer than `concurrency`, plus one per executor task waiting on the commit, three per
slot; tests/engine/test_workers_pg.py). A healthy run sends each row once.

Rate limits are shared through one token-bucket row per provider+model (engine/shared_limiter.py):
workers take permits in small slices, so together they stay under the spec's rpm/tpm however many
join or leave.
The --max-cost budget is the run's, not a worker's: workers draw it in small slices from one row
(`SharedBudget`), so together they never pass the tightest --max-cost any of them was given.
"""

from __future__ import annotations

import asyncio
import copy
import os
import socket
import threading
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Awaitable, Callable, Iterator

from batchor.engine.batch_handover import refuse_batched_rows
from batchor.engine.budget import CLI_SOURCE, Budget
from batchor.engine.events import Event, EventSink, Progress
from batchor.engine.limits import RunLimits
from batchor.engine.shared_limiter import SharedRateLimiter
from batchor.engine.types import StopSignal, WorkItem
from batchor.engine.work import StepWork
from batchor.state.base import RunRecord, RunStatus
from batchor.state.leases import LeaseBook
from batchor.state.postgres_store import PostgresStore

LEASE_ENV = "BATCHOR_LEASE_S"
DEFAULT_LEASE_S = 30.0
GROUP_COMMIT_S = 0.1  # the longest an answer waits for its group's commit


def lease_seconds(limits: RunLimits) -> float:
    """How long a silent worker keeps its claims: `limits.lease_s`, else $BATCHOR_LEASE_S, else 30 s."""
    value = limits.lease_s or os.environ.get(LEASE_ENV) or DEFAULT_LEASE_S
    return max(1.0, float(value))


class SharedRun:
    """This process's membership in a run shared with other workers."""

    def __init__(
        self, store: PostgresStore, run: RunRecord, progress: Progress, limits: RunLimits, emit: EventSink
    ) -> None:
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.worker_id = f"{self.host}-{self.pid}-{uuid.uuid4().hex[:6]}"
        self.lease_s = lease_seconds(limits)
        self.book = LeaseBook(store, self.worker_id, self.lease_s)
        self.run, self.progress, self.limits, self.emit = run, progress, limits, emit
        self.slice = min(256, max(8, 2 * limits.concurrency))
        self.group_rows = min(256, max(8, limits.concurrency))
        self._stopping = threading.Event()
        self._beat: threading.Thread | None = None
        self._claimer = ThreadPoolExecutor(1, thread_name_prefix="batchor-claims")
        self.budget: Budget = Budget(None)

    @classmethod
    def join(
        cls,
        store: PostgresStore,
        run: RunRecord,
        progress: Progress,
        limits: RunLimits,
        emit: EventSink,
        max_cost: float | None = None,
        budget_source: str = CLI_SOURCE,
    ) -> "SharedRun":
        shared = cls(store, run, progress, limits, emit)
        shared.run = shared.book.join_run(run, shared.host, shared.pid)
        limit = shared.book.set_budget(shared.run.run_id, max_cost)
        shared.budget = (
            SharedBudget(shared.book, shared.run.run_id, limit, budget_source) if limit is not None else Budget(None)
        )
        shared._beat = threading.Thread(target=shared._heartbeat, name="batchor-heartbeat", daemon=True)
        shared._beat.start()
        emit(
            Event(
                "worker_joined", {"run_id": shared.run.run_id, "worker_id": shared.worker_id, "lease_s": shared.lease_s}
            )
        )
        return shared

    # --- heartbeat -----------------------------------------------------------------------------

    def counters(self) -> dict[str, float]:
        p = self.progress
        return {
            "requests": p.total,
            "succeeded": p.succeeded,
            "failed": p.failed,
            "cached": p.cached,
            "skipped": p.skipped,
            "input_tokens": p.input_tokens,
            "output_tokens": p.output_tokens,
            "cost_usd": p.cost_usd,
        }

    def _heartbeat(self) -> None:
        interval = wait = self.lease_s / 3
        while not self._stopping.wait(wait):
            try:
                self.book.heartbeat(self.run.run_id, self.counters())
                wait = interval
            except Exception:  # noqa: BLE001 - retried soon: the lease has slack for about two beats
                wait = min(1.0, interval / 4)

    def _stop_heartbeat(self) -> None:
        self._claimer.shutdown(wait=False, cancel_futures=True)
        self._stopping.set()
        if self._beat is not None:
            self._beat.join(timeout=self.lease_s)

    def leave(self, run: RunRecord) -> bool:
        """Stop working on the run; True when this was its last live worker (the run is closed)."""
        self._stop_heartbeat()
        self._return_budget()
        status = "finished" if run.status in ("succeeded", "partial", "failed") else run.status
        return self.book.leave(run, status, self.counters())

    def abandon(self, ended: tuple[RunStatus, str]) -> None:
        """An error ends this worker: give its claims back at once instead of waiting for the lease.
        `ended` is the (status, reason) the run gets if this was its last worker."""
        self._stop_heartbeat()
        self.run.status, self.run.paused_reason = ended
        try:
            self._return_budget()
            self.book.leave(self.run, "failed", self.counters())
        except Exception:  # noqa: BLE001 - the original error matters more; the lease expires anyway
            pass

    def _return_budget(self) -> None:
        if isinstance(self.budget, SharedBudget):
            self.budget.give_back()

    def sink_options(self) -> dict[str, Any]:
        """How the realtime sink commits answers: one transaction per group, not per answer (a
        transaction's fixed cost, on both sides, was most of what an answer cost the database)."""
        return {"flush_rows": self.group_rows, "flush_interval_s": GROUP_COMMIT_S}

    # --- one wave ------------------------------------------------------------------------------

    async def run_wave(
        self,
        works: list[StepWork],
        realtime: Callable[[Iterator[WorkItem]], Awaitable[None]],
        batches: Callable[[list[StepWork]], Awaitable[None]],
        stop: StopSignal,
    ) -> None:
        """Claim and run slices of the wave until nothing is pending or held by other live workers."""
        await asyncio.to_thread(refuse_batched_rows, self.book.store, works)
        await asyncio.to_thread(self._enqueue, works)
        steps = [w.lease_name for w in works]
        while not stop.stopped:
            jobs = []
            live = [w for w in works if w.pending]
            direct = [w for w in live if w.step.mode != "batch"]
            if direct:
                jobs.append(realtime(self.claimed_items(direct)))
            claimed = [await asyncio.to_thread(self._claim_all, w) for w in live if w.step.mode == "batch"]
            if any(w.pending for w in claimed):
                jobs.append(batches([w for w in claimed if w.pending]))
            await asyncio.gather(*jobs)
            if stop.stopped or not await self._wait_for_others(steps, stop):
                return

    def _enqueue(self, works: list[StepWork]) -> None:
        for work in works:
            if work.pending:
                self.book.enqueue(self.run.run_id, work.lease_name, work.pending, widens=work.widens)

    async def _wait_for_others(self, steps: list[str], stop: StopSignal) -> bool:
        """True when items became claimable (a lease expired); False when the wave is done."""
        poll = min(2.0, max(0.2, self.lease_s / 4))
        announced = False
        while not stop.stopped:
            claimable, held = await asyncio.to_thread(self.book.open_items, self.run.run_id, steps)
            if claimable:
                return True
            if not held:
                return False
            if not announced:
                self.emit(Event("waiting_for_workers", {"held_by_others": held, "steps": steps}))
                announced = True
            try:
                await asyncio.wait_for(stop.event.wait(), poll)
            except TimeoutError:
                pass
        return False

    def claimed_items(self, works: list[StepWork]) -> Iterator[WorkItem]:
        """The requests of `works` this worker claims, slice by slice, in plan order."""
        for work in works:
            yield from self._claimed(work)

    def _claimed(self, work: StepWork) -> Iterator[WorkItem]:
        # Claims come lowest position first, so a fresh slice lies ahead of the last yielded item;
        # only items re-claimed from a dead worker can lie behind it: they get a second pass.
        ahead: dict[str, int] = {}
        behind: set[str] = set()
        last = -1
        stream = work.items(wanted=ahead.__contains__)  # rows claimed by others are not parsed
        slices = Slices(self.book, self.run.run_id, work.lease_name, self.slice, self._claimer)
        while True:
            if not ahead:
                got = slices.take()
                if not got:
                    break
                for key, position in got:
                    if position > last:
                        ahead[key] = position
                    else:
                        behind.add(key)
                continue
            slices.prefetch(len(ahead))
            item = next((i for i in stream if i.key in ahead), None)
            if item is None:
                behind.update(ahead)
                break
            last = ahead.pop(item.key)
            yield item
        if behind:
            yield from work.items(wanted=behind.__contains__)

    def _claim_all(self, work: StepWork) -> StepWork:
        """Batch steps: claim every claimable key at once; only claimed keys go into batches."""
        keys: set[str] = set()
        while got := self.book.claim(self.run.run_id, work.lease_name, 10_000):
            keys.update(k for k, _ in got)
        mine = copy.copy(work)
        mine.pending = work.pending.only(keys)
        return mine

    # --- shared rate limit ---------------------------------------------------------------------

    def limiter(self, local: Any, runtimes: dict[str, Any]) -> SharedRateLimiter:
        """A limiter drawing from the shared bucket of these models (keyed by provider:model)."""
        models = sorted({f"{r.plan.provider}:{r.plan.model}" for r in runtimes.values()})
        return SharedRateLimiter(
            self.book, "+".join(models), self.limits.rpm, self.limits.tpm, sleep=getattr(local, "sleep", asyncio.sleep)
        )


class Slices:
    """A step's claims, slice after slice. The next slice is claimed in a thread once half of the
    current one is left: the claims run on the event loop's thread (the executor's producer), and a
    claim made there would hold every request in flight for a few database round trips."""

    def __init__(self, book: LeaseBook, run_id: str, step: str, size: int, pool: ThreadPoolExecutor) -> None:
        self.book, self.run_id, self.step, self.size, self.pool = book, run_id, step, size, pool
        self._next: Future[list[tuple[str, int]]] | None = None
        self._empty = False

    def take(self) -> list[tuple[str, int]]:
        """The next slice, (key, position) pairs, lowest positions first; empty when nothing is left."""
        upcoming, self._next = self._next, None
        got = upcoming.result() if upcoming is not None else self._claim()
        self._empty = not got
        return got

    def prefetch(self, left: int) -> None:
        if self._next is None and not self._empty and left <= self.size // 2:
            self._next = self.pool.submit(self._claim)

    def _claim(self) -> list[tuple[str, int]]:
        return self.book.claim(self.run_id, self.step, self.size)


class SharedBudget(Budget):
    """Same face as `Budget`; the money comes from the run's budget row, drawn in slices.

    A slice is a fiftieth of the limit (or one request's worst case when larger), so the database
    sees a few draws per run. Money drawn but not spent goes back when the worker leaves; a worker
    that dies keeps its draw, so a crash can only make the run stop early, never overspend.
    """

    SLICES = 50

    def __init__(self, book: LeaseBook, run_id: str, limit_usd: float, source: str = CLI_SOURCE) -> None:
        super().__init__(limit_usd, source=source)
        self.book, self.run_id = book, run_id
        self.drawn = 0.0

    def reserve_money(self, upper_cost: float) -> bool:
        short = self.spent + self.reserved + upper_cost - self.drawn
        if short > 1e-12:
            want = max(short, float(self.limit or 0) / self.SLICES)
            self.drawn += self.book.draw_budget(self.run_id, want, short)
            if self.spent + self.reserved + upper_cost > self.drawn + 1e-12:
                self.exhausted = True
                return False
        self.reserved += upper_cost
        return True

    def give_back(self) -> None:
        unspent = self.drawn - self.spent - self.reserved
        if unspent > 1e-12:
            self.book.return_budget(self.run_id, unspent)
            self.drawn -= unspent
