"""One step's batches in a wave: its queue of keys, its live batches and its provider client.

The lane records each chunk as an intent before creating it (a create whose answer was lost is
looked up, `find`, before anything else: never paid twice), reserves each row's worst-case cost
first, and hands the rows it could not send back to the queue. Polling and collecting are its
second half (engine/batch_collect.py). What it needs of the run comes in a `BatchContext`.
"""

from __future__ import annotations

import json
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any

from batchor.engine.batch_collect import KEEP_FILES_OPTION, Collecting
from batchor.engine.batch_context import BatchContext
from batchor.engine.batch_late import LateCreates
from batchor.engine.batch_poll import DUE_SLACK_S
from batchor.engine.batch_rows import RowJudge
from batchor.engine.embed_groups import unsendable_text
from batchor.engine.events import Event
from batchor.engine.fallback import moves_on
from batchor.engine.reachability import endpoint_of
from batchor.engine.recorder import ReaskPolicy, Recorder
from batchor.engine.resume import interrupted_reasks
from batchor.engine.types import StepRuntime, WorkItem
from batchor.engine.work import StepWork
from batchor.errors import (
    AttachmentError,
    AuthenticationError,
    BatchCreateUnknownError,
    BatchUnsupportedError,
    ModelNotFoundError,
    NoApiKeyError,
    ProviderError,
    QuotaExhaustedError,
    RateLimitedError,
    TransientProviderError,
)
from batchor.fingerprint import sha256_hex
from batchor.providers.base import LLMRequest
from batchor.providers.batch import FAILED, BatchProvider, BatchTag, RemoteBatch, crash_point
from batchor.state.batches import BatchRecord


def step_fingerprint(key_prefix: str) -> str:
    """Batches are re-attached by request family (provider, model, params, schema), not by plan."""
    return sha256_hex(key_prefix)[:16]


@dataclass
class _Chunk:
    keys: list[str]
    lines: list[bytes]
    size: int
    tokens: int
    reserved: float


class Lane(Collecting):
    """One step's batches: its queue of keys, its live batches and its provider client."""

    def __init__(
        self, ctx: BatchContext, runtime: StepRuntime, provider: BatchProvider, connection: dict[str, Any]
    ) -> None:
        self.ctx, self.runtime, self.provider, self.connection = ctx, runtime, provider, connection
        self.plan = runtime.plan
        self.fp = step_fingerprint(self.plan.key_prefix)
        self.live: dict[str, BatchRecord] = {}
        self.keys_of: dict[str, list[str]] = {}
        self.reserved: dict[str, float] = {}
        self.items: dict[str, WorkItem] = {}
        self.queue: deque[str] = deque()
        self.create_failures = 0
        self.judge: RowJudge | None = None
        self.troubles: dict[str, int] = {}  # batch id -> calls about it that failed in a row
        self.parked: set[str] = set()  # batches left live at the provider: not polled again this run
        self.expected_ends: dict[str, float] = {}  # batch id -> clock time its reported progress points to
        self.due: dict[str, float] = {}  # batch id -> clock time of its next poll
        self.typical_s: dict[int, float | None] = {}  # batch size -> how long such batches took here before
        self.submitted_s: dict[str, float] = {}  # batch id -> clock time its create returned (this run)
        self.keep_files = bool((connection.get("options") or {}).get(KEEP_FILES_OPTION))
        self.unknown: set[str] = set()  # batches whose create got no answer in time (this run)
        self.unseen: set[str] = set()  # ... and not found by the first lookup: looked up again at the end
        self.found_late = LateCreates()  # ... and not found then either: looked for every round (batch_late.py)

    def open(self, work: StepWork) -> None:
        self.work, self.collect_only = work, work.step.mode != "batch"
        ledger = self.ctx.ledger
        in_flight: set[str] = set()
        now = self.ctx.clock()
        for batch in ledger.live_batches(self.fp):
            self.live[batch.batch_id] = batch
            if batch.state != "intent":  # submitted by an earlier apply: it may be done already
                self.due[batch.batch_id] = now
            self.keys_of[batch.batch_id] = ledger.batch_keys(batch.batch_id)
            in_flight.update(self.keys_of[batch.batch_id])
        self.items = {item.key: item for item in work.items()}
        self.queue = deque(k for k in self.items if k not in in_flight)
        attempts = ledger.attempts_used(list(self.items))
        recorder = Recorder(self.ctx.sink, self.ctx.progress)
        self.judge = RowJudge(
            self.runtime,
            recorder,
            self.ctx.progress,
            self.ctx.stop,
            self.ctx.limits.max_attempts,
            attempts,
            ReaskPolicy.from_limits(self.ctx.limits),
        )
        self.judge.resume_reasks(self.items, interrupted_reasks(self.ctx.sink.store, [self.plan.name]))
        self.chunk = ledger.next_chunk(self.ctx.job_id, self.plan.name)
        self.ctx.emit(
            Event(
                "batch_step",
                {
                    "step": self.plan.name,
                    "queued": len(self.queue),
                    "reattached": len(self.live),
                    "in_flight_rows": len(in_flight),
                },
            )
        )

    # --- submitting ------------------------------------------------------------------------

    async def submit_ready(self) -> bool:
        changed = await self.found_late.look(self) if self.found_late.given_up else False
        for batch in [b for b in self.active if b.state == "intent" and self._lookup_due(b)]:
            changed |= await self._reconcile(batch)
        changed |= self._to_fallbacks()
        while self.queue and not self.collect_only and not self.ctx.stop.stopped:
            if any(b.state == "intent" and b.batch_id not in self.unseen for b in self.live.values()):
                break  # an unresolved create first: never two uncertain batches at once
            chunk = self._next_chunk()
            if chunk is None:
                break
            batch = self._record(chunk)
            crash_point("after_intent")
            created = await self._create(batch, chunk.lines)
            chunk.lines.clear()  # else held while the next chunk's lines are built: two batch files in memory
            if not created:
                break
            changed = True
        return changed

    def _to_fallbacks(self) -> bool:
        """The step's model is out of quota (`runtime.down`) and `fallback_on` has quota: the rows not
        sent yet fail without a call, for the fallback models' wave (engine/other_models.py), as
        realtime sends them to the fallbacks directly. True when rows were failed so."""
        down, judge = self.runtime.down, self.judge
        if down is None or judge is None or self.collect_only or not self.queue or not moves_on(self.runtime, down):
            return False
        while self.queue:
            judge.recorder.fail(self.items[self.queue.popleft()], 0, down)
        return True

    def _next_chunk(self) -> _Chunk | None:
        limits, room = self.provider.limits, self.ctx.token_room(self.plan.model)
        if room is not None and room <= 0:
            return None
        chunk = _Chunk([], [], 0, 0, 0.0)
        while self.queue and len(chunk.keys) < limits.max_requests:
            item = self.items[self.queue[0]]
            request = self._sendable(item)
            if request is None:  # the row failed alone, before any call
                self.queue.popleft()
                continue
            line = self.provider.encode(request)
            if chunk.keys and (
                chunk.size + len(line) > limits.max_bytes
                or (room is not None and chunk.tokens + item.input_tokens > room)
            ):
                break
            cost = self.runtime.attempt_upper_cost(item, request)  # each attempt, re-asks too
            if not self.ctx.budget.try_reserve(cost):
                if self.ctx.budget.reserved - chunk.reserved <= 1e-12:  # no live batch will give room back
                    self.ctx.stop.stop("budget", self.ctx.budget.reached())
                break
            self.queue.popleft()
            chunk.keys.append(item.key)
            chunk.lines.append(line)
            chunk.size, chunk.tokens, chunk.reserved = (
                chunk.size + len(line),
                chunk.tokens + item.input_tokens,
                chunk.reserved + cost,
            )
        return chunk if chunk.keys else None

    def hand_back(self) -> None:
        """A collect-only lane leaves its rows still without an answer to the realtime executor."""
        if self.collect_only:
            self.work.pending = self.work.pending.only(self.queue)

    def _sendable(self, item: WorkItem) -> LLMRequest | None:
        """The row's request, or None when it cannot be sent (its attachment changed; a text to
        embed empty or too long, refused as realtime refuses it): the row is failed, nothing uploaded."""
        assert self.judge is not None
        problem: ProviderError | None = unsendable_text(self.plan, item) if self.plan.kind == "embed" else None
        if problem is None:
            try:
                return self._request(item)
            except AttachmentError as exc:
                problem = exc
        self.judge.recorder.fail(item, 0, problem)
        return None

    def _request(self, item: WorkItem) -> LLMRequest:
        assert self.judge is not None
        return self.judge.request(item)

    def _record(self, chunk: _Chunk) -> BatchRecord:
        batch = BatchRecord(
            batch_id=f"batchor-{uuid.uuid4().hex[:20]}",
            job_id=self.ctx.job_id,
            run_id=self.ctx.run_id,
            step=self.plan.name,
            step_fp=self.fp,
            provider=self.plan.provider,
            model=self.plan.model,
            connection=json.dumps(self.connection, sort_keys=True),
            chunk=self.chunk,
            requests=len(chunk.keys),
            input_tokens=chunk.tokens,
            bytes=chunk.size,
            created_s=self.ctx.clock(),
        )
        self.ctx.ledger.record_intent(batch, chunk.keys)
        self.chunk += 1
        self.live[batch.batch_id] = batch
        self.keys_of[batch.batch_id] = chunk.keys
        self.reserved[batch.batch_id] = chunk.reserved
        return batch

    def tag_of(self, batch: BatchRecord) -> BatchTag:
        return BatchTag(batch.batch_id, batch.job_id, batch.step, batch.chunk, batch.requests, batch.created_s)

    async def _create(self, batch: BatchRecord, lines: list[bytes]) -> bool:
        """Create the remote batch once; an uncertain outcome stays an intent, to be reconciled."""
        try:
            remote = await self.provider.submit(self.tag_of(batch), lines)
        except BatchCreateUnknownError as exc:  # may exist: looked up (`find`) before anything else
            # ... but not at once: a create answered after the client's timeout may take as long
            # again to show at the provider, so the first look waits longer than the timeout.
            self.due[batch.batch_id] = self.ctx.clock() + self._settle_s()
            self.unknown.add(batch.batch_id)
            self.ctx.emit(
                Event(
                    "batch_create_failed",
                    {"step": batch.step, "batch_id": batch.batch_id, "error": exc.message, "outcome": "unknown"},
                )
            )
            return False
        except QuotaExhaustedError as exc:
            self._abandon(batch, exc.message)
            if moves_on(self.runtime, exc):  # as realtime: its rows go to the fallback models instead
                self.runtime.down = exc
                self._to_fallbacks()
            else:
                self.ctx.stop.stop("quota", exc.message)
            return False
        except (AuthenticationError, NoApiKeyError):
            raise
        except (RateLimitedError, TransientProviderError) as exc:  # refused after every retry: nothing created
            self._abandon(batch, exc.message)
            self._halt(exc.message)
            return False
        except ProviderError as exc:  # refused as a whole: every row used an attempt
            if exc.status in (404, 405) and not isinstance(exc, ModelNotFoundError):
                self._abandon(batch, exc.message)  # no Batch API there: its rows stay pending
                raise BatchUnsupportedError(
                    f"{endpoint_of(self.plan)} has no Batch API for step {self.plan.name} ({exc.message}); "
                    "nothing was sent in batch",
                    hint="run it with `--mode realtime` (or set `limits.mode: realtime` in the spec)",
                    status=exc.status,
                ) from None
            await self._collect(batch, RemoteBatch(batch.remote_id or "", "refused", FAILED, error=exc), read=False)
            return False
        crash_point("after_create")
        self._submitted(batch, remote)
        crash_point("after_submit")
        return True

    def _halt(self, reason: str) -> None:
        """The provider keeps refusing: rows not sent stay pending, and the run says why."""
        self.ctx.stop.stop("provider_unavailable", f"{reason}; rows not sent stay pending: run `batchor apply` again")

    async def _reconcile(self, batch: BatchRecord) -> bool:
        """An intent whose create may or may not have happened: look it up before anything else."""
        try:
            remote = await self.provider.find(self.tag_of(batch), self.ctx.ledger.claimed_remote_ids(batch.provider))
        except (AuthenticationError, NoApiKeyError):
            raise
        except ProviderError as exc:  # the intent stays: sending its rows again could pay twice
            self._trouble(batch, exc)
            return False
        self.troubles.pop(batch.batch_id, None)
        if remote is not None:
            self.unknown.discard(batch.batch_id)
            self.unseen.discard(batch.batch_id)
            self._submitted(batch, remote, event="batch_reattached")
            return True
        if batch.batch_id in self.unknown and batch.batch_id not in self.unseen:
            # Not there yet: other rows go on, and this one is looked up once more at the end of
            # the run, before its rows are sent again (a create seen late is never paid twice).
            self.unseen.add(batch.batch_id)
            self.due[batch.batch_id] = self.ctx.clock() + self._settle_s()
            return False
        if batch.batch_id in self.unknown:  # it may still show: looked for every round from now on
            keys = self.keys_of.get(batch.batch_id) or self.ctx.ledger.batch_keys(batch.batch_id)
            self.found_late.given_up[batch.batch_id] = (batch, list(keys))
        self.unknown.discard(batch.batch_id)
        self.unseen.discard(batch.batch_id)
        self._abandon(batch, "not created at the provider")
        self.create_failures += 1
        if self.create_failures >= self.ctx.limits.max_attempts:
            self._halt(
                f"batch create for {batch.batch_id}: no answer from the provider {self.create_failures} times in a row"
            )
        return True

    def _settle_s(self) -> float:
        """How long an unknown create is given to show at the provider: twice the call timeout."""
        return 2.0 * self.ctx.limits.request_timeout_s

    def _lookup_due(self, batch: BatchRecord) -> bool:
        """An intent of an earlier apply is looked up at once; one whose create's answer did not
        come in time, once its wait is over; a second time only at the end of the run (nothing
        else of this step left to send or wait for)."""
        due = self.due.get(batch.batch_id)
        if due is not None and self.ctx.clock() + DUE_SLACK_S < due:
            return False
        if batch.batch_id not in self.unseen:
            return True
        others = [b for b in self.active if b.batch_id != batch.batch_id]
        if not others and (not self.queue or self.collect_only or self.ctx.stop.stopped):
            return True
        self.due[batch.batch_id] = self.ctx.clock() + self.ctx.pace.poll_max_s  # not before then
        return False

    def _submitted(self, batch: BatchRecord, remote: RemoteBatch, event: str = "batch_submitted") -> None:
        now = self.submitted_s[batch.batch_id] = self.ctx.clock()
        self.ctx.ledger.mark_submitted(batch.batch_id, remote.remote_id, remote.status)
        if batch.run_id == self.ctx.run_id:
            self._schedule(batch, now)
        else:  # found again after an earlier apply's uncertain create: it may be done already
            self.due[batch.batch_id] = now
        batch.state, batch.remote_id, batch.remote_status = "submitted", remote.remote_id, remote.status
        self.ctx.emit(
            Event(
                event,
                {
                    "step": batch.step,
                    "batch_id": batch.batch_id,
                    "remote_id": remote.remote_id,
                    "requests": batch.requests,
                    "chunk": batch.chunk,
                },
            )
        )

    def _abandon(self, batch: BatchRecord, reason: str) -> None:
        """Nothing exists remotely for this intent: its rows go back to the front of the queue."""
        keys = self.keys_of.pop(batch.batch_id, None) or self.ctx.ledger.batch_keys(batch.batch_id)
        self.ctx.ledger.mark_collected(batch.batch_id, dict.fromkeys(keys, "unsent"), error=reason)
        self.ctx.budget.settle(self.reserved.pop(batch.batch_id, 0.0), 0.0)
        self.live.pop(batch.batch_id, None)
        self.queue.extendleft(reversed([k for k in keys if k in self.items]))
