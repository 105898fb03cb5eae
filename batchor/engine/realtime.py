"""Realtime execution: many requests in flight through one provider client each.

A producer feeds a bounded queue; workers take items, reserve each attempt's worst-case cost
(re-asks included), pace through the limiter, call the provider, retry what is transient and
hand every outcome to the recorder (engine/recorder.py). `concurrency` bounds the rows being
worked on, not the rows waiting out a backoff or a Retry-After: a waiting row gives its place to
the next one (engine/seats.py), so random 429s cost their own requests a wait, not the run its
throughput.
A stop request (Ctrl+C, SIGTERM, quota, budget) stops sending; work in flight may finish.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import Any, Awaitable, Callable, Iterable

import pyarrow as pa

from batchor.engine.budget import Budget, Hold
from batchor.engine.embed_groups import Grouper, GroupSender, WorkGroup
from batchor.engine.events import Event, EventSink, Progress
from batchor.engine.fallback import fallback_item, moves_on
from batchor.engine.limiter import Limiter, RateLimiter
from batchor.engine.limits import RunLimits
from batchor.engine.reachability import STOP_REASON as UNREACHABLE
from batchor.engine.reachability import Reachability
from batchor.engine.recorder import ReaskPolicy, Recorder
from batchor.engine.resume import interrupted_reasks, rejection, resumed_request
from batchor.engine.retry import backoff_delay, maybe_billed
from batchor.engine.seats import Seat, Seats
from batchor.engine.sink import ResultSink
from batchor.engine.types import StepRuntime, StopSignal, WorkItem
from batchor.errors import (
    AttachmentError,
    AuthenticationError,
    ContextLengthError,
    InvalidOutputError,
    ModelNotFoundError,
    ProviderError,
    ProviderUnreachableError,
    QuotaExhaustedError,
    RateLimitedError,
    TruncatedOutputError,
)
from batchor.plan.context import too_long
from batchor.plan.escalate import condition, escalates
from batchor.providers.base import Completion, Embedder, Embeddings, EmbedRequest, LLMRequest, Provider
from batchor.providers.unreachable import timed_out

REJECTED = (InvalidOutputError, TruncatedOutputError)  # answers judged unusable (see recorder.judge)
MAX_RATE_LIMIT_WAITS = 100  # 429s do not use attempts, but a request cannot wait forever


class RealtimeExecutor:
    def __init__(
        self,
        steps: dict[str, StepRuntime],
        *,
        limits: RunLimits,
        budget: Budget,
        sink: ResultSink,
        progress: Progress,
        emit: EventSink,
        stop: StopSignal,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        seed: int | None = None,
    ) -> None:
        self.steps = steps
        self.concurrency = limits.concurrency
        self.max_attempts = limits.max_attempts
        self.timeout = limits.request_timeout_s
        self.limiter: Limiter = RateLimiter(limits.rpm, limits.tpm, sleep=sleep)
        self.budget, self.sink, self.progress, self.emit, self.stop = budget, sink, progress, emit, stop
        self.recorder = Recorder(sink, progress)
        self.reask = ReaskPolicy.from_limits(limits)
        self.interrupted = interrupted_reasks(sink.store, steps)  # re-asks a crashed process did not send
        self.sleep = sleep
        self.rng = random.Random(seed)
        self._last_progress = 0.0
        self._seats = Seats(self.concurrency)
        self.reachability = Reachability(self.concurrency)
        self.grouper = Grouper(steps)
        self.max_rate_limit_waits = MAX_RATE_LIMIT_WAITS
        # fallback or escalation key -> the row's own request: (item, attempts, its failure, or the
        # answer an escalation replaces)
        self._falling: dict[str, tuple[WorkItem, int, ProviderError | None, tuple[str, Completion] | None]] = {}
        self._escalating: dict[str, tuple[int, str, Completion]] = {}  # answers that ask for the stronger model
        self._conditions: dict[str, Any] = {}  # step -> its compiled `escalate.when`

    async def run(self, items: Iterable[WorkItem]) -> None:
        queue: asyncio.Queue[WorkItem | None] = asyncio.Queue(maxsize=self.concurrency * 4)
        workers = [asyncio.create_task(self._worker(queue)) for _ in range(self._seats.workers)]
        try:
            await self._produce(items, queue)
        finally:
            for _ in workers:
                await queue.put(None)
            await asyncio.gather(*workers)
            await self.sink.flush()
            self._report(force=True)

    async def _produce(self, items: Iterable[WorkItem], queue: asyncio.Queue) -> None:
        for count, item in enumerate(items):
            if self.stop.stopped:
                return
            for ready in self.grouper.add(item):  # an embedding step's texts go many to a call
                await queue.put(ready)
            if count % 256 == 0:
                await asyncio.sleep(0)
        for group in self.grouper.rest():
            if self.stop.stopped:
                return
            await queue.put(group)

    async def _worker(self, queue: asyncio.Queue) -> None:
        seat = Seat(self._seats)
        while True:
            item = await seat.next_item(queue)
            if item is None:
                return
            step = self.steps[item.step]
            hold = Hold(self.budget, 0.0, active=False)
            try:
                if isinstance(item, WorkGroup):
                    if not self.stop.stopped:
                        await GroupSender(self, step, hold, seat).send(item)
                elif not self.stop.stopped and await self._reserve(hold, step.upper_cost(item)):
                    await self._process(item, step, hold, seat)
            finally:
                seat.leave()
            hold.release()
            if self.sink.due():
                await self.sink.flush()
            self._report()

    async def _process(self, item: WorkItem, step: StepRuntime, hold: Hold, seat: Seat) -> None:
        """Attempts of one row until it is answered, fails, or the run stops (the row stays pending)."""
        if too_long(item.input_tokens, step.plan.max_tokens, step.plan.context_window):
            self.recorder.fail(
                item,
                0,
                ContextLengthError(
                    f"prompt has {item.input_tokens} tokens; with max_tokens {step.plan.max_tokens} it exceeds the "
                    f"{step.plan.context_window}-token context window of {step.plan.model} (not sent)"
                ),
            )
            return
        try:
            request, attempt = step.request(item), 0
        except AttachmentError as exc:  # planned as unsendable, or the file changed since: fails alone
            self.recorder.fail(item, 0, exc)
            return
        interrupted = self.interrupted.pop(item.key, None)
        if interrupted is not None:  # its re-ask was never sent: send it now, after the attempts made
            if interrupted.attempts >= self.max_attempts:
                self.recorder.fail(item, interrupted.attempts, rejection(interrupted))
                return
            request, attempt = resumed_request(request, interrupted), interrupted.attempts
            if not await self._reserve(hold, step.attempt_upper_cost(item, request)):
                return
        error = step.down if step.down is not None and step.fallbacks else None  # straight to the fallbacks
        if error is None:
            error, attempt = await self._ask(item, step, request, attempt, hold, seat)
        if error is not None and not await self._fall_back(item, step, error, attempt, hold, seat):
            self.recorder.fail(item, attempt, error)
        cheap = self._escalating.pop(item.key, None)
        if cheap is not None:
            await self._escalate(item, step, cheap, hold, seat)

    async def _ask(
        self, item: WorkItem, step: StepRuntime, request: LLMRequest, attempt: int, hold: Hold, seat: Seat
    ) -> tuple[ProviderError | None, int]:
        """Attempts of one request until it is answered or the run stops (None), or it fails for
        good: (its last error, the attempts made), for the caller to record or fall back on."""
        while True:
            attempt += 1
            error = await self._attempt(item, step, request, attempt, hold, seat)
            if error is None:
                return None, attempt
            retry = self.reask.next_request(request, error, step.plan.max_tokens)
            if retry is None or attempt >= self.max_attempts:
                return error, attempt
            if self.stop.stopped:
                return None, attempt  # it could be asked again, but the run stops: the row stays pending
            if not await self._reserve(hold, step.attempt_upper_cost(item, retry)):  # re-asks are paid
                return None, attempt
            request = retry
            self.progress.retries += 1
            if not isinstance(error, REJECTED):  # a rejected answer came back fine: ask again at once
                await seat.wait(self.sleep, backoff_delay(attempt, retry_after=error.retry_after, rng=self.rng))
                if self.stop.stopped:
                    return None, attempt  # stopped while it waited: the row stays pending

    async def _fall_back(
        self, item: WorkItem, step: StepRuntime, error: ProviderError, attempts: int, hold: Hold, seat: Seat
    ) -> bool:
        """Ask the step's fallback models in turn for a row its model failed (engine/fallback.py).
        True when the row is settled here (answered by one, or failed by the last) or the run stops
        (it stays pending); False when `error` does not move it on."""
        if not moves_on(step, error):
            return False
        for runtime in step.fallbacks:
            other = fallback_item(item, runtime)
            self._falling[other.key] = (item, attempts, error, None)
            if await self._stored_answer(other, runtime):
                return True
            if self.stop.stopped or not await self._reserve(hold, runtime.upper_cost(other)):
                return True
            last, used = await self._ask(other, runtime, runtime.request(other), 0, hold, seat)
            if last is None:
                return True
            self._falling.pop(other.key, None)
            self.recorder.fail(other, used, last, row_end=False)  # stored under its own key, not the row's end
            if not moves_on(step, last):
                break
        self.recorder.fail(item, attempts, error)
        return True

    async def _escalate(
        self, item: WorkItem, step: StepRuntime, cheap: tuple[int, str, Completion], hold: Hold, seat: Seat
    ) -> None:
        """Ask the stronger model (`escalate.to`) for a row whose answer met `escalate.when`; when it
        cannot answer, the row keeps its own model's answer."""
        runtime = step.escalation
        assert runtime is not None
        attempt, output, completion = cheap
        strong = fallback_item(item, runtime)
        self._falling[strong.key] = (item, attempt, None, (output, completion))
        if await self._stored_answer(strong, runtime):
            return
        if not self.stop.stopped and await self._reserve(hold, runtime.upper_cost(strong)):
            last, used = await self._ask(strong, runtime, runtime.request(strong), 0, hold, seat)
            if last is not None:
                self.recorder.fail(strong, used, last, row_end=False)
        if self._falling.pop(strong.key, None) is not None:  # not answered: the row's own answer stands
            self.recorder.succeed(item, attempt, output, completion)

    async def _stored_answer(self, item: WorkItem, runtime: StepRuntime) -> bool:
        """A fallback request answered before (by another run or job): linked, not paid again."""
        found = await asyncio.to_thread(self.sink.store.results_for_keys, pa.array([item.key], pa.string()))
        stored = [o for s, o in zip(*(found.column(c).to_pylist() for c in ("status", "output"))) if s == "succeeded"]
        if not stored:
            return False
        self.progress.cached += 1
        self._succeeded(item, 0, stored[0], None)
        return True

    def _succeeded(self, item: WorkItem, attempt: int, output: str, completion: Completion | None) -> None:
        """A request's accepted answer; a fallback's also answers the row's own request it stands for."""
        link = self._falling.pop(item.key, None)
        if link is None and completion is not None and self._escalates(item, output):
            self._escalating[item.key] = (attempt, output, completion)  # asked of the stronger model next
            return
        if completion is not None:
            self.recorder.succeed(item, attempt, output, completion, fallback_for=link[0].key if link else None)
        if link is None:
            return
        primary, attempts, error, replaced = link
        if replaced is None:
            assert error is not None
            self.recorder.fell_back(primary, attempts, error, answered_by=item.key, answer=output)
        else:  # the escalation's answer replaces the row's own (kept under its own key)
            self.recorder.succeed(primary, attempts, *replaced, counted=False, answered_by=item.key, answer=output)

    def _escalates(self, item: WorkItem, output: str) -> bool:
        step = self.steps[item.step]
        if step.escalation is None or step.plan.escalate_when is None:
            return False
        if item.step not in self._conditions:
            self._conditions[item.step] = condition(item.step, step.plan.escalate_when)
        answer = json.loads(output) if step.plan.json_answers else output
        return escalates(self._conditions[item.step], item.step, answer)

    async def _reserve(self, hold: Hold, amount: float) -> bool:
        """Reserve one attempt's worst case before it is sent. While other attempts in flight hold
        reservations it waits for them to settle (they usually cost far less); when nothing else is
        held and it still does not fit, the budget is reached: the run stops, this row stays pending."""
        while not hold.renew(amount):
            if self.budget.reserved <= 1e-12 or self.stop.stopped:
                self.stop.stop("budget", self.budget.reached())
                return False
            await asyncio.sleep(0.005)
        return True

    async def _attempt(
        self, item: WorkItem, step: StepRuntime, request: LLMRequest, attempt: int, hold: Hold, seat: Seat
    ) -> ProviderError | None:
        """One attempt (429s waited out inside it). None: the row is settled or the run stops;
        else the error of this attempt, which may be asked again."""
        waits = 0
        while True:
            sent_at = await self.limiter.acquire(item.input_tokens + step.plan.expected_output_tokens)
            started = time.monotonic()
            self.progress.in_flight += 1
            try:
                completion = await self._call(step.provider, request)
            except RateLimitedError as exc:
                waits += 1
                self.progress.rate_limited += 1
                self.reachability.reached()
                wait = self.limiter.on_rate_limited(exc, sent_at)
                self._call_failed(item, step, attempt, exc, started, hold)
                if self.stop.stopped:
                    return None  # the run stops: the row stays pending, not failed by its 429
                if waits > MAX_RATE_LIMIT_WAITS:
                    self.recorder.fail(item, attempt, exc)
                    return None
                await seat.wait(self.sleep, wait)
                if self.stop.stopped:
                    return None  # the run stopped meanwhile: the row stays pending
                continue
            except ProviderError as exc:
                self._call_failed(item, step, attempt, exc, started, hold)
                return self._beyond_the_row(exc, step)
            finally:
                self.progress.in_flight -= 1
            self.limiter.on_success(completion.rate_limits)
            self.reachability.reached()
            output, error, cost = self.recorder.answer(item, step, attempt, completion, duration_ms=_ms(started))
            hold.settle(cost)
            if error is None:
                self._succeeded(item, attempt, output or "", completion)
            return error

    def _beyond_the_row(self, exc: ProviderError, step: StepRuntime) -> ProviderError | None:
        """What a failed call means for the run: None when it stops it (the row stays pending),
        else the error, for the row to retry or fail."""
        self.limiter.on_failure()
        if moves_on(step, exc) and isinstance(exc, (QuotaExhaustedError, ProviderUnreachableError)):
            if isinstance(exc, QuotaExhaustedError) or self.reachability.failed(exc):
                step.down = exc  # every row would fail the same way: they go to the fallbacks directly
            return exc
        if isinstance(exc, ProviderUnreachableError):
            if self.reachability.failed(exc):
                self.stop.stop(UNREACHABLE, Reachability.stop_detail(exc))
            return None if self.stop.stopped else exc
        dead = self.reachability.dead_endpoint(exc, step.plan)
        if dead is not None:
            self.stop.stop(UNREACHABLE, dead)
            return None
        if exc.status is not None:
            self.reachability.reached(exc.status)
        if isinstance(exc, (QuotaExhaustedError, ModelNotFoundError, AuthenticationError)):  # every row alike
            self.stop.stop("quota" if isinstance(exc, QuotaExhaustedError) else exc.code, exc.message)
            return None
        return exc

    def _call_failed(
        self, item: WorkItem, step: StepRuntime, attempt: int, exc: ProviderError, started: float, hold: Hold
    ) -> None:
        cost = self.recorder.call_failed(item, step, attempt, exc, duration_ms=_ms(started))
        if cost is not None and exc.completion.usage_known:  # billed (a refusal): the reservation is used up
            hold.settle(cost)
        elif cost is not None or maybe_billed(exc):  # sent, answer lost or unreadable (its cost unknown, at
            # most its worst case): the budget counts the worst case, the ledger an estimate (or nothing)
            hold.settle(max(cost or 0.0, hold.amount if hold.active else 0.0))

    async def _call_embed(self, provider: Embedder, request: EmbedRequest) -> Embeddings:
        try:
            async with asyncio.timeout(self.timeout):
                return await provider.embed(request)
        except TimeoutError:
            raise timed_out(f"no answer within {self.timeout:g} s (request_timeout_s)") from None

    async def _call(self, provider: Provider, request: LLMRequest) -> Completion:
        try:
            async with asyncio.timeout(self.timeout):  # unlike wait_for, no extra task per call
                return await provider.complete(request)
        except TimeoutError:
            raise timed_out(f"no answer within {self.timeout:g} s (request_timeout_s)") from None

    def _report(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last_progress >= 0.25:
            self._last_progress = now
            self.emit(Event("progress", self.progress.snapshot()))


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
