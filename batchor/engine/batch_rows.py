"""Batch engine: what one row's result in a finished batch means.

The judgement and the recording are the realtime ones (engine/recorder.py: same output
validation, same ledger of attempts, same error classes): a 4xx fails the row at once; rate
limits, quota and 5xx come back in a later batch (quota, when it moves the step's rows on to its
fallback models, fails the row for them instead: engine/other_models.py); an invalid structured output is asked again
until `max_attempts`, a truncated one only with `limits.on_truncation: reask`. Attempts are
counted per row across batches and processes; rows a batch never ran (expired, cancelled) and
rate-limited rows do not use attempts.
"""

from __future__ import annotations

from dataclasses import replace

from batchor.engine.events import Progress
from batchor.engine.fallback import moves_on
from batchor.engine.recorder import ReaskPolicy, Recorder
from batchor.engine.resume import Interrupted, resumed_request
from batchor.engine.types import StepRuntime, StopSignal, WorkItem
from batchor.errors import (
    AttachmentError,
    ProviderError,
    QuotaExhaustedError,
    RateLimitedError,
    TransientProviderError,
)
from batchor.providers.base import LLMRequest
from batchor.providers.batch import RowResult

MAX_FREE_RETRIES = 10  # resubmissions that use no attempt (rate limits, expired batches) per row
REQUEUE = ("retry", "retry_free", "missing")


class RowJudge:
    """Settles rows of finished batches into the sink; returns each row's outcome."""

    def __init__(
        self,
        runtime: StepRuntime,
        recorder: Recorder,
        progress: Progress,
        stop: StopSignal,
        max_attempts: int,
        attempts: dict[str, tuple[int, int]],
        reask: ReaskPolicy | None = None,
    ) -> None:
        self.runtime, self.recorder, self.progress, self.stop = runtime, recorder, progress, stop
        self.max_attempts = max_attempts
        self.attempts = attempts  # key -> (attempts used, free retries)
        self.reask = reask or ReaskPolicy()
        self.reasks: dict[str, LLMRequest] = {}  # rows whose next attempt differs from the planned request

    def resume_reasks(self, items: dict[str, WorkItem], interrupted: dict[str, Interrupted]) -> None:
        """Rows whose re-ask a crashed process never sent send it next (engine/resume.py)."""
        for key, found in interrupted.items():
            if key in items:
                try:
                    self._keep(key, resumed_request(self.runtime.request(items[key]), found))
                except AttachmentError:  # its file changed since: the planned request fails alone
                    continue

    def request(self, item: WorkItem) -> LLMRequest:
        """The request a row's next attempt sends (a re-ask's own, else the planned one), its
        attachments read now: a re-ask waiting for the next batch is kept without them."""
        reask = self.reasks.get(item.key)
        if reask is None:
            return self.runtime.request(item)
        if not self.runtime.plan.attachments:
            return reask
        return replace(reask, attachments=self.runtime.request(item).attachments)

    def _keep(self, key: str, reask: LLMRequest) -> None:
        """Hold a row's re-ask until its next batch: without its files' bytes, so rows waiting to
        be asked again never hold their attachments (the next `request` reads them again)."""
        self.reasks[key] = replace(reask, attachments=()) if reask.attachments else reask

    def settle(self, item: WorkItem, row: RowResult, counted: bool, paid_here: bool | None = None) -> tuple[str, float]:
        """(outcome, cost) of one row; `counted` rows move the progress counters. `paid_here`
        True: its spend is this run's even when its outcome is not counted (a late create's
        answer: the row's count comes from the batch its rows were sent again in)."""
        if row.missing:
            return self._free(item, None, counted, "missing"), 0.0
        used, _ = self.attempts.get(item.key, (0, 0))
        paid = counted if paid_here is None else paid_here
        if row.completion is not None:
            output, error, cost = self.recorder.answer(
                item, self.runtime, used + 1, row.completion, raw=row.raw, counted=paid
            )
            if error is None:
                self.recorder.succeed(item, used + 1, output or "", row.completion, counted)
                self.reasks.pop(item.key, None)
                return "ok", cost
            return self._consume(item, error, counted, recorded=True), cost
        error = row.error or TransientProviderError("the batch returned neither an answer nor an error")
        billed = None
        if error.completion is not None:  # a refusal: billed all the same
            billed = self.recorder.call_failed(item, self.runtime, used + 1, error, counted=paid)
        return self.judge_error(item, error, counted, recorded=billed is not None), billed or 0.0

    def judge_error(self, item: WorkItem, error: ProviderError, counted: bool, recorded: bool = False) -> str:
        """A row's error, from its own line or from its batch as a whole."""
        if isinstance(error, QuotaExhaustedError):
            if moves_on(self.runtime, error):  # the fallback models take the row, and the rows not sent yet
                self.runtime.down = error
                return self._fail_now(item, error, counted, recorded)
            self.stop.stop("quota", error.message)
            return self._free(item, error, counted)
        if isinstance(error, RateLimitedError):
            return self._free(item, error, counted)
        if error.transient:
            return self._consume(item, error, counted, recorded)
        return self._fail_now(item, error, counted, recorded)

    def _fail_now(self, item: WorkItem, error: ProviderError, counted: bool, recorded: bool) -> str:
        used, _ = self.attempts.get(item.key, (0, 0))
        if not recorded:
            self._record(item, used + 1, error)
        return self._fail(item, used + 1, error, counted)

    def _consume(self, item: WorkItem, error: ProviderError, counted: bool, recorded: bool = False) -> str:
        used, free = self.attempts.get(item.key, (0, 0))
        used += 1
        self.attempts[item.key] = (used, free)
        if not recorded:
            self._record(item, used, error)
        try:
            current = self.request(item)
        except AttachmentError:  # its file changed since it was sent: no retry
            return self._fail(item, used, error, counted)
        retry = self.reask.next_request(current, error, self.runtime.plan.max_tokens)
        if retry is None or used >= self.max_attempts:
            return self._fail(item, used, error, counted)
        if retry is not current:
            self._keep(item.key, retry)
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

    def _fail(self, item: WorkItem, attempts: int, error: ProviderError, counted: bool) -> str:
        self.reasks.pop(item.key, None)
        self.recorder.fail(item, attempts, error, counted)
        return "failed"

    def _record(self, item: WorkItem, attempt: int, error: ProviderError) -> None:
        self.recorder.call_failed(item, self.runtime, attempt, error)
