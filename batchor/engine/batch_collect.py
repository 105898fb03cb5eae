"""Batch engine, second half: polling live batches and collecting finished ones.

A failed call about a live batch (poll, results download) never abandons it: the call was already
retried (engine/batch_calls.py); the next round tries again, and after `max_attempts` rounds the
batch is left live at the provider (the run ends `in_flight`, saying why) for a later apply to
collect. Its rows are never sent again meanwhile: that could pay for them twice. A quota error
pauses the run the same way. Results the provider no longer has (404/410) fail their rows with
that reason. Once a batch's rows are stored, its provider files (inputs, results) are deleted,
best effort, unless `model.options.keep_provider_files` is set.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from batchor.engine.batch_context import BatchContext
from batchor.engine.batch_late import LATE_SUFFIX, LateCreates
from batchor.engine.batch_poll import DUE_SLACK_S, expected_end, typical_seconds
from batchor.engine.batch_rows import REQUEUE, RowJudge
from batchor.engine.events import Event
from batchor.engine.realtime import StepRuntime, WorkItem
from batchor.engine.sink import KEEP_ATTACHED_S
from batchor.errors import (
    AuthenticationError,
    BatchResultsGoneError,
    BatchResultUnreadableError,
    NoApiKeyError,
    ProviderError,
    QuotaExhaustedError,
)
from batchor.providers.batch import BatchProvider, ReleasesCaches, RemoteBatch, RowResult, crash_point
from batchor.state.batches import BatchRecord

KEEP_FILES_OPTION = "keep_provider_files"  # model.options: keep batch input/result files at the provider
GONE = (404, 410)  # a results download refused so: the provider no longer has them (expired, deleted)


class Collecting:
    """The polling and collecting half of a step's lane (`batch_lane.Lane`)."""

    ctx: BatchContext
    runtime: StepRuntime
    provider: BatchProvider
    live: dict[str, BatchRecord]
    keys_of: dict[str, list[str]]
    reserved: dict[str, float]
    items: dict[str, WorkItem]
    judge: RowJudge | None
    troubles: dict[str, int]
    parked: set[str]
    expected_ends: dict[str, float]
    due: dict[str, float]
    typical_s: dict[int, float | None]
    submitted_s: dict[str, float]
    keep_files: bool
    queue: Any
    found_late: LateCreates
    chunk: int

    @property
    def active(self) -> list[BatchRecord]:
        """Live batches this run still waits for."""
        return [b for b in self.live.values() if b.batch_id not in self.parked]

    def started(self, batch: BatchRecord) -> float:
        """When the batch began running at the provider, as near as known: its create's return in
        this run (a large upload before it is not the batch's age), else its intent."""
        return self.submitted_s.get(batch.batch_id, batch.created_s)

    def _trouble(self, batch: BatchRecord, exc: ProviderError) -> None:
        """A call about a live batch failed (after its retries): try again next round, up to a
        limit; then leave the batch live at the provider, for a later apply. Never resubmit it."""
        failures = self.troubles[batch.batch_id] = self.troubles.get(batch.batch_id, 0) + 1
        self.ctx.emit(
            Event(
                "batch_call_failed",
                {"step": batch.step, "batch_id": batch.batch_id, "error": exc.message, "failures": failures},
            )
        )
        if isinstance(exc, QuotaExhaustedError):
            self.parked.add(batch.batch_id)
            self.ctx.stop.stop("quota", exc.message)
        elif failures >= self.ctx.limits.max_attempts:
            self.parked.add(batch.batch_id)
            self.ctx.stop.stop(
                "in_flight",
                f"batch {batch.batch_id} ({batch.remote_id or 'create not confirmed'}) "
                f"is left at the provider: {exc.message}; run `batchor apply` again to "
                "collect it",
            )

    def due_at(self, batch: BatchRecord, now: float) -> float:
        """Clock time of the batch's next poll (an intent's next reconciliation follows its age)."""
        found = self.due.get(batch.batch_id)
        return found if found is not None else now + self.ctx.pace.wait(now, self.started(batch))

    def _schedule(self, batch: BatchRecord, now: float) -> None:
        """The batch's next poll, from `now` (its submit or a poll of it): batch_poll.py."""
        self.due[batch.batch_id] = now + self.ctx.pace.wait(now, self.started(batch), self._expected_end(batch))

    def _expected_end(self, batch: BatchRecord) -> float | None:
        """Where its reported progress points, else how long such batches took here before."""
        found = self.expected_ends.get(batch.batch_id)
        if found is not None:
            return found
        if batch.requests not in self.typical_s:
            plan = self.runtime.plan
            self.typical_s[batch.requests] = typical_seconds(
                self.ctx.ledger.durations(plan.provider, plan.model, batch.requests)
            )
        typical = self.typical_s[batch.requests]
        return None if typical is None else self.started(batch) + typical

    async def poll_due(self, now: float) -> bool:
        """Poll the live batches whose time has come (one call each) and collect the finished ones."""
        changed = False
        for batch in [b for b in self.active if b.state != "intent" and self.due_at(b, now) <= now + DUE_SLACK_S]:
            try:
                remote = await self.provider.poll(batch.remote_id or "")
            except (AuthenticationError, NoApiKeyError):
                raise
            except ProviderError as exc:  # one failed poll never abandons a live batch
                self._trouble(batch, exc)
                self._schedule(batch, self.ctx.clock())
                continue
            crash_point("during_poll")
            if not remote.ended:
                self.troubles.pop(batch.batch_id, None)
                self._running(batch, remote)
                continue  # an ended batch's count goes on until its results are read: see _collect
            changed |= await self._collect(batch, remote)
        return changed

    def _running(self, batch: BatchRecord, remote: RemoteBatch) -> None:
        """A poll found the batch still running: note its status and where its progress points."""
        if remote.status != batch.remote_status:
            self.ctx.ledger.mark_polled(batch.batch_id, remote.status)
            batch.remote_status = remote.status
        now = self.ctx.clock()
        end = expected_end(now, self.started(batch), remote.done, remote.requests or batch.requests)
        if end is None:
            self.expected_ends.pop(batch.batch_id, None)
        else:
            self.expected_ends[batch.batch_id] = end
        self._schedule(batch, now)
        self.ctx.emit(
            Event(
                "batch_polled",
                {
                    "step": batch.step,
                    "batch_id": batch.batch_id,
                    "remote_status": remote.status,
                    "requests": batch.requests,
                    "done": remote.done,
                },
            )
        )

    async def _collect(self, batch: BatchRecord, remote: RemoteBatch, read: bool = True) -> bool:
        """Store a finished batch's answers; queue its rows without an answer again."""
        if batch.state not in ("intent", remote.state):
            self.ctx.ledger.mark_ended(
                batch.batch_id, remote.state, remote.status, remote.error.message if remote.error else None
            )
            batch.state = remote.state
        rows: list[RowResult] = []
        if read:
            read_back = await self._read(batch, remote)
            if read_back is None:
                self._schedule(batch, self.ctx.clock())
                return False  # read again at the next poll
            rows, remote = read_back
            self.troubles.pop(batch.batch_id, None)
            if self._not_ours(batch, remote, rows):
                return True
        error = remote.error.message if remote.error else None
        keys = self.keys_of.get(batch.batch_id) or self.ctx.ledger.batch_keys(batch.batch_id)
        outcomes, cost = self._settle(keys, rows, remote)
        with self.ctx.store.kept_attached(KEEP_ATTACHED_S):  # the answers' write and the collect: one attach
            await self.ctx.sink.flush()
            crash_point("after_results")
            self.ctx.ledger.mark_collected(batch.batch_id, outcomes, error)
        reserved = self.reserved.pop(batch.batch_id, 0.0)
        gone = isinstance(remote.error, BatchResultsGoneError)  # billed, usage unknown: count the worst case
        self.ctx.budget.settle(reserved, reserved if gone else cost)
        self.live.pop(batch.batch_id, None)
        self.keys_of.pop(batch.batch_id, None)
        self.expected_ends.pop(batch.batch_id, None)
        self.due.pop(batch.batch_id, None)
        self.submitted_s.pop(batch.batch_id, None)
        if read and not self.keep_files:
            await self._delete_files(batch, remote)
        if batch.batch_id not in self.found_late.late:  # a late create's rows were given back already
            self.queue.extend(k for k, o in outcomes.items() if o in REQUEUE and k in self.items)
        if not self.live and not self.queue:
            await self._release_caches(batch)
        counts = {o: sum(1 for v in outcomes.values() if v == o) for o in set(outcomes.values())}
        self.ctx.emit(
            Event(
                "batch_collected",
                {
                    "step": batch.step,
                    "batch_id": batch.batch_id,
                    "remote_id": remote.remote_id,
                    "state": remote.state,
                    "outcomes": counts,
                    "error": error,
                },
            )
        )
        self.ctx.report()
        return True

    def _not_ours(self, batch: BatchRecord, remote: RemoteBatch, rows: list[RowResult]) -> bool:
        """A batch whose results carry request keys its intent never sent is another job's: one
        adopted by elimination after an uncertain create (`RemoteBatch.guessed`: Anthropic's batches
        carry no tag of ours), whose size and time matched. Nothing of it is stored or cancelled; its
        record keeps the provider id (never adopted again here), and the intent is looked up again
        without it: our own batch may still be there, and its rows are sent again only if it is not."""
        keys = self.keys_of.get(batch.batch_id) or self.ctx.ledger.batch_keys(batch.batch_id)
        wanted = set(keys)
        if not any(row.key and row.key not in wanted for row in rows):
            return False
        why = f"{remote.remote_id} holds other requests than this batch's: another job's batch, not adopted"
        self.ctx.ledger.mark_collected(batch.batch_id, dict.fromkeys(keys, "unsent"), error=why)
        for held in (self.live, self.due, self.expected_ends, self.submitted_s, self.troubles):
            held.pop(batch.batch_id, None)
        self.keys_of.pop(batch.batch_id, None)
        self.ctx.emit(
            Event("batch_not_ours", {"step": batch.step, "batch_id": batch.batch_id, "remote_id": remote.remote_id})
        )
        if batch.batch_id in self.found_late.late:  # its rows went out again already: keep looking, as before
            self.found_late.late.discard(batch.batch_id)
            self.found_late.remote_ids.discard(remote.remote_id)
            original = replace(batch, batch_id=batch.batch_id.removesuffix(LATE_SUFFIX))
            self.found_late.given_up[original.batch_id] = (original, keys)
            return True
        again = replace(batch, batch_id=f"{batch.batch_id}-again", chunk=self.chunk, state="intent", extra={})
        again.remote_id = again.remote_status = None
        self.chunk += 1
        self.ctx.ledger.record_intent(again, keys)  # the same keys and intent time: looked up at once
        self.live[again.batch_id], self.keys_of[again.batch_id] = again, keys
        if batch.batch_id in self.reserved:
            self.reserved[again.batch_id] = self.reserved.pop(batch.batch_id)
        return True

    async def _read(self, batch: BatchRecord, remote: RemoteBatch) -> tuple[list[RowResult], RemoteBatch] | None:
        """The batch's rows; None when the download failed for now. Results the provider no longer
        has (404/410: expired) fail the batch's rows with that reason."""
        try:
            return [row async for row in self.provider.results(remote)], remote
        except (AuthenticationError, NoApiKeyError):
            raise
        except ProviderError as exc:
            if exc.status not in GONE:
                self._trouble(batch, exc)
                return None
            gone = BatchResultsGoneError(
                f"the provider no longer has this batch's results ({exc.message}); "
                "its rows may have been billed, so they are not sent again by themselves",
                status=exc.status,
            )
            return [], replace(remote, error=gone)

    async def _delete_files(self, batch: BatchRecord, remote: RemoteBatch) -> None:
        """Best effort (each call retried), all at once (a round trip each, not one after another):
        a file left behind never fails the run, it is reported."""
        errors = await asyncio.gather(*(self._delete_file(name) for name in remote.files))
        for name, error in zip(remote.files, errors):
            if error is not None:
                self.ctx.emit(
                    Event(
                        "batch_file_kept",
                        {"step": batch.step, "batch_id": batch.batch_id, "file": name, "error": error},
                    )
                )

    async def _delete_file(self, name: str) -> str | None:
        try:
            await self.provider.delete_file(name)
        except (ProviderError, NoApiKeyError) as exc:
            return exc.message
        return None

    async def _release_caches(self, batch: BatchRecord) -> None:
        """The step's explicit context cache (Gemini, `cache.explicit`) goes once no batch of the
        step is left to collect and no row waits to be sent in another; one that fails to go
        expires at the end of its lifetime (its fee was recorded to then when it was made)."""
        cache = self.runtime.plan.prompt_cache
        if cache is None or not cache.explicit or not isinstance(self.provider, ReleasesCaches):
            return
        try:
            await self.provider.release_caches(self.ctx.job_id, cache.key)
        except (ProviderError, NoApiKeyError) as exc:
            self.ctx.emit(Event("batch_file_kept", {"step": batch.step, "batch_id": batch.batch_id,
                                                    "file": "context cache", "error": exc.message}))  # fmt: skip

    def _settle(self, keys: list[str], rows: list[RowResult], remote: RemoteBatch) -> tuple[dict[str, str], float]:
        assert self.judge is not None
        if remote.remote_id in self.found_late.remote_ids:
            return self.found_late.settle(self.judge, self._item, keys, rows)
        wanted, outcomes, cost = set(keys), {}, 0.0
        unreadable = next((r.error for r in rows if r.key not in wanted and _unreadable(r.error)), None)
        for row in rows:
            if row.key in wanted and row.key not in outcomes:
                item, counted = self._item(row.key)
                outcomes[row.key], spent = self.judge.settle(item, row, counted)
                cost += self.runtime.upper_cost(item) if _unreadable(row.error) else spent  # billed, usage unknown
        for key in keys:
            if key not in outcomes:
                item, counted = self._item(key)
                error = remote.error or unreadable  # a line not saying whose it was: any of these may be it
                if error is not None:
                    outcomes[key] = self.judge.judge_error(item, error, counted)
                    cost += self.runtime.upper_cost(item) if error is unreadable else 0.0
                else:
                    outcomes[key] = self.judge.settle(item, RowResult(key, missing=True), counted)[0]
        return outcomes, cost

    def _item(self, key: str) -> tuple[WorkItem, bool]:
        item = self.items.get(key)
        return (item, True) if item is not None else (WorkItem(key, self.runtime.plan.name, (), 0), False)


def _unreadable(error: ProviderError | None) -> bool:
    return isinstance(error, BatchResultUnreadableError)
