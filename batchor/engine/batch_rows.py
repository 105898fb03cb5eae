"""Batch engine: what one row's result in a finished batch means.

The judgement is the realtime one (same output validation, same error classes): a 4xx fails the
row at once; rate limits, quota and 5xx come back in a later batch; an invalid structured output
is asked again until `max_attempts`. Attempts are counted per row across batches and processes;
rows a batch never ran (expired, cancelled) and rate-limited rows do not use attempts.
"""

from __future__ import annotations

import json

from batchor.engine.events import Progress
from batchor.engine.realtime import check_output
from batchor.engine.sink import ResultSink
from batchor.engine.types import StepRuntime, StopSignal, WorkItem
from batchor.errors import (
    InvalidOutputError,
    ProviderError,
    QuotaExhaustedError,
    RateLimitedError,
    TransientProviderError,
)
from batchor.providers.base import Completion
from batchor.providers.batch import RowResult

MAX_FREE_RETRIES = 10  # resubmissions that use no attempt (rate limits, expired batches) per row
REQUEUE = ("retry", "retry_free", "missing")


class RowJudge:
    """Settles rows of finished batches into the sink; returns each row's outcome."""

    def __init__(self, runtime: StepRuntime, sink: ResultSink, progress: Progress, stop: StopSignal,
                 max_attempts: int, attempts: dict[str, tuple[int, int]]) -> None:
        self.runtime, self.sink, self.progress, self.stop = runtime, sink, progress, stop
        self.max_attempts = max_attempts
        self.attempts = attempts  # key -> (attempts used, free retries)

    def settle(self, item: WorkItem, row: RowResult, counted: bool) -> tuple[str, float]:
        """(outcome, cost) of one row; `counted` rows move the progress counters."""
        if row.missing:
            return self._free(item, None, counted, "missing"), 0.0
        if row.completion is not None:
            try:
                output = check_output(self.runtime.plan, row.completion)
            except InvalidOutputError as exc:
                return self._consume(item, exc, counted), 0.0
            return "ok", self._succeed(item, row.completion, output, counted, row.raw)
        error = row.error or TransientProviderError("the batch returned neither an answer nor an error")
        return self.judge_error(item, error, counted), 0.0

    def judge_error(self, item: WorkItem, error: ProviderError, counted: bool) -> str:
        """A row's error, from its own line or from its batch as a whole."""
        if isinstance(error, QuotaExhaustedError):
            self.stop.stop("quota", error.message)
            return self._free(item, error, counted)
        if isinstance(error, RateLimitedError):
            return self._free(item, error, counted)
        if error.transient:
            return self._consume(item, error, counted)
        used, _ = self.attempts.get(item.key, (0, 0))
        self._record(item, used + 1, error)
        return self._fail(item, used + 1, error, counted)

    def _consume(self, item: WorkItem, error: ProviderError, counted: bool) -> str:
        used, free = self.attempts.get(item.key, (0, 0))
        used += 1
        self.attempts[item.key] = (used, free)
        self._record(item, used, error)
        if used >= self.max_attempts:
            return self._fail(item, used, error, counted)
        if counted:
            self.progress.retries += 1
        return "retry"

    def _free(self, item: WorkItem, error: ProviderError | None, counted: bool, outcome: str = "retry_free") -> str:
        used, free = self.attempts.get(item.key, (0, 0))
        free += 1
        self.attempts[item.key] = (used, free)
        if error is not None:
            self._record(item, used + 1, error)
            if counted:
                self.progress.rate_limited += isinstance(error, RateLimitedError)
        if free > MAX_FREE_RETRIES:
            error = error or TransientProviderError("no result: every batch ended before this row ran")
            return self._fail(item, max(used, 1), error, counted)
        return outcome

    def _succeed(self, item: WorkItem, completion: Completion, output: str, counted: bool,
                 raw: bytes | None) -> float:
        used, _ = self.attempts.get(item.key, (0, 0))
        cost = self.runtime.cost(completion, item)
        if raw is None and completion.raw:
            raw = json.dumps(completion.raw, separators=(",", ":")).encode()
        self.sink.add_attempt(key=item.key, attempt=used + 1, outcome="ok", status_code=200, error=None,
                              duration_ms=0, raw=raw)
        self.sink.add_result(key=item.key, step=item.step, status="succeeded", output=output, error_code=None,
                             error=None, attempts=used + 1, input_tokens=completion.input_tokens or item.input_tokens,
                             output_tokens=completion.output_tokens, cost_usd=cost)
        if counted:
            self.progress.count_success(cost, completion.input_tokens, completion.output_tokens)
        return cost

    def _fail(self, item: WorkItem, attempts: int, error: ProviderError, counted: bool) -> str:
        if not counted:  # a row of another job's batch: that job records its own failures
            return "failed"
        self.sink.add_result(key=item.key, step=item.step, status="failed", output=None, error_code=error.code,
                             error=error.message[:2000], attempts=attempts, input_tokens=0, output_tokens=0,
                             cost_usd=0.0)
        self.progress.done += 1
        self.progress.failed += 1
        return "failed"

    def _record(self, item: WorkItem, attempt: int, error: ProviderError) -> None:
        self.sink.add_attempt(key=item.key, attempt=attempt, outcome=error.code, status_code=error.status,
                              error=error.message[:2000], duration_ms=0)
