"""Realtime execution: many requests in flight through one provider client each.

A producer feeds a bounded queue (reserving each request's worst-case cost first); `concurrency`
workers take items, pace through the limiter, call the provider, retry what is transient and hand
every outcome to the result sink. A stop request (Ctrl+C, SIGTERM, quota) stops sending; work in
flight is allowed to finish.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import Awaitable, Callable, Iterable

from batchor.engine.budget import Budget
from batchor.engine.events import Event, EventSink, Progress
from batchor.engine.limiter import Limiter, RateLimiter
from batchor.engine.limits import RunLimits
from batchor.engine.retry import backoff_delay
from batchor.engine.sink import ResultSink
from batchor.engine.types import StepRuntime, StopSignal, WorkItem
from batchor.errors import (
    AuthenticationError,
    ContextLengthError,
    InvalidOutputError,
    ModelNotFoundError,
    ProviderError,
    QuotaExhaustedError,
    RateLimitedError,
    TransientProviderError,
)
from batchor.plan.context import too_long
from batchor.plan.model import StepPlan
from batchor.plan.request import llm_request
from batchor.providers.base import Completion, LLMRequest, Provider
from batchor.schema.core import parse_structured

MAX_RATE_LIMIT_WAITS = 100  # 429s do not use attempts, but a request cannot wait forever


def check_output(plan: StepPlan, completion: Completion) -> str:
    """The answer as stored: text, or compact JSON valid against the step's schema (else InvalidOutputError).

    Shared by the realtime and batch executors, so a row is judged the same either way."""
    if plan.schema is None:
        return completion.text
    value, errors = parse_structured(completion.text, plan.schema)
    if errors:
        raise InvalidOutputError("answer does not match the output schema: " + "; ".join(errors[:3]))
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class RealtimeExecutor:
    def __init__(self, steps: dict[str, StepRuntime], *, limits: RunLimits, budget: Budget,
                 sink: ResultSink, progress: Progress, emit: EventSink, stop: StopSignal,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep, seed: int | None = None) -> None:
        self.steps = steps
        self.concurrency = limits.concurrency
        self.max_attempts = limits.max_attempts
        self.timeout = limits.request_timeout_s
        self.limiter: Limiter = RateLimiter(limits.rpm, limits.tpm, sleep=sleep)
        self.budget, self.sink, self.progress, self.emit, self.stop = budget, sink, progress, emit, stop
        self.sleep = sleep
        self.rng = random.Random(seed)
        self._last_progress = 0.0

    async def run(self, items: Iterable[WorkItem]) -> None:
        queue: asyncio.Queue[WorkItem | None] = asyncio.Queue(maxsize=self.concurrency * 4)
        workers = [asyncio.create_task(self._worker(queue)) for _ in range(self.concurrency)]
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
            if not self.budget.try_reserve(self.steps[item.step].upper_cost(item)):
                self.stop.stop("budget", f"--max-cost {self.budget.limit} reached")
                return
            await queue.put(item)
            if count % 256 == 0:
                await asyncio.sleep(0)

    async def _worker(self, queue: asyncio.Queue) -> None:
        while True:
            item = await queue.get()
            if item is None:
                return
            step = self.steps[item.step]
            reserved = step.upper_cost(item)
            if self.stop.stopped:
                self.budget.settle(reserved, 0.0)
                continue
            cost = await self._process(item, step)
            self.budget.settle(reserved, cost)
            if self.sink.due():
                await self.sink.flush()
            self._report()

    async def _process(self, item: WorkItem, step: StepRuntime) -> float:
        request = llm_request(step.plan, item.key, item.messages)
        if too_long(item.input_tokens, step.plan.max_tokens, step.plan.context_window):
            return self._fail(item, 0, ContextLengthError(
                f"prompt has {item.input_tokens} tokens; with max_tokens {step.plan.max_tokens} it exceeds the "
                f"{step.plan.context_window}-token context window of {step.plan.model} (not sent)"))
        attempt, waits = 0, 0
        while True:
            await self.limiter.acquire(item.input_tokens + step.plan.expected_output_tokens)
            started = time.monotonic()
            self.progress.in_flight += 1
            try:
                completion = await self._call(step.provider, request)
                output = self._check_output(step.plan, completion)
            except RateLimitedError as exc:
                waits += 1
                self.progress.rate_limited += 1
                self.limiter.on_rate_limited(exc.retry_after)
                self._attempt(item, attempt + 1, exc, started)
                if waits <= MAX_RATE_LIMIT_WAITS and not self.stop.stopped:
                    continue
                return self._fail(item, attempt + 1, exc)
            except QuotaExhaustedError as exc:
                self._attempt(item, attempt + 1, exc, started)
                self.stop.stop("quota", exc.message)
                return 0.0
            except (ModelNotFoundError, AuthenticationError) as exc:  # every row would fail alike
                self._attempt(item, attempt + 1, exc, started)
                self.stop.stop(exc.code, exc.message)
                return 0.0
            except ProviderError as exc:
                attempt += 1
                self._attempt(item, attempt, exc, started)
                if exc.transient and attempt < self.max_attempts and not self.stop.stopped:
                    self.progress.retries += 1
                    await self.sleep(backoff_delay(attempt, retry_after=exc.retry_after, rng=self.rng))
                    continue
                return self._fail(item, attempt, exc)
            finally:
                self.progress.in_flight -= 1
            self.limiter.on_success(completion.rate_limits)
            return self._succeed(item, step, attempt + 1, output, completion, started)

    async def _call(self, provider: Provider, request: LLMRequest) -> Completion:
        try:
            async with asyncio.timeout(self.timeout):  # unlike wait_for, no extra task per call
                return await provider.complete(request)
        except TimeoutError:
            raise TransientProviderError(f"no answer within {self.timeout:g} s (request_timeout_s)") from None

    def _check_output(self, plan: StepPlan, completion: Completion) -> str:
        return check_output(plan, completion)

    def _succeed(self, item: WorkItem, step: StepRuntime, attempts: int, output: str, completion: Completion,
                 started: float) -> float:
        cost = step.cost(completion, item)
        keep = completion.raw and self.sink.keep_raw
        raw = json.dumps(completion.raw, separators=(",", ":")).encode() if keep else None
        self.sink.add_attempt(key=item.key, attempt=attempts, outcome="ok", status_code=200, error=None,
                              duration_ms=int((time.monotonic() - started) * 1000), raw=raw)
        self.sink.add_result(key=item.key, step=item.step, status="succeeded", output=output, error_code=None,
                             error=None, attempts=attempts, input_tokens=completion.input_tokens or item.input_tokens,
                             output_tokens=completion.output_tokens, cost_usd=cost)
        self.progress.count_success(cost, completion.input_tokens, completion.output_tokens)
        return cost

    def _fail(self, item: WorkItem, attempts: int, exc: ProviderError) -> float:
        self.sink.add_result(key=item.key, step=item.step, status="failed", output=None, error_code=exc.code,
                             error=exc.message[:2000], attempts=attempts, input_tokens=0, output_tokens=0,
                             cost_usd=0.0)
        self.progress.done += 1
        self.progress.failed += 1
        return 0.0

    def _attempt(self, item: WorkItem, attempt: int, exc: ProviderError, started: float) -> None:
        self.sink.add_attempt(key=item.key, attempt=attempt, outcome=exc.code, status_code=exc.status,
                              error=exc.message[:2000], duration_ms=int((time.monotonic() - started) * 1000))

    def _report(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last_progress >= 0.25:
            self._last_progress = now
            self.emit(Event("progress", self.progress.snapshot()))
