"""A dead endpoint stops the run fast instead of failing every row `max_attempts` times.

A refused connection or an unknown host name (`ProviderUnreachableError`: nothing was sent)
says nothing about the row: every other request would fail the same way. So, like an unknown
model, a few such failures in a row with no answer in between stop the run; its rows stay
pending for the next apply. An endpoint that has answered during this run gets more slack
(a restart or a network blip fails every request in flight at once), then stops the same way.

An endpoint that takes connections and answers nothing (every request times out), or answers
the same 404 to every request (a wrong base URL or path), is as dead: that many timeouts, or
identical 404s, in a row with no other answer in between stop the run with a coded reason naming
the endpoint, instead of trying each row `max_attempts` times `request_timeout_s` long.
"""

from __future__ import annotations

from batchor.errors import EndpointNotFoundError, EndpointUnresponsiveError, ProviderError, ProviderUnreachableError
from batchor.plan.endpoint import normalise_url
from batchor.plan.model import StepPlan
from batchor.providers import base_url, provider_info

STOP_AFTER = 3  # connection failures in a row, with no answer yet, that stop the run
STOP_AFTER_ANSWERS_PER_SLOT = 2  # once it answered: this many per concurrency slot (+ STOP_AFTER)
STOP_REASON = "unreachable"


class Reachability:
    """Counts connection failures in a row for one executor; any answer resets the count."""

    def __init__(self, concurrency: int = 1) -> None:
        self.answered = False
        self.in_a_row = 0
        self.slack = STOP_AFTER + STOP_AFTER_ANSWERS_PER_SLOT * max(1, concurrency)
        self.silent = 0  # requests in a row that timed out
        self.same_404: tuple[str, int] = ("", 0)  # the last 404's message, and how many in a row said it
        self.same_404_limit = STOP_AFTER + max(1, concurrency)

    def reached(self, status: int | None = None) -> None:
        """The provider answered (any HTTP status: it is there; a 404 keeps its own count)."""
        self.answered = True
        self.in_a_row = 0
        self.silent = 0
        if status != 404:
            self.same_404 = ("", 0)

    def dead_endpoint(self, error: ProviderError, plan: StepPlan) -> str | None:
        """One more timeout or 404: the stop reason when the endpoint looks dead, else None."""
        if error.timed_out:
            self.silent += 1
            if self.silent < self.slack:
                return None
            return _stop_detail(
                EndpointUnresponsiveError.code,
                f"{self.silent} requests in a row to {endpoint_of(plan)} got no answer within "
                "request_timeout_s (it takes connections but does not answer)",
            )
        if error.status != 404:
            return None
        message, count = self.same_404
        self.same_404 = (error.message, count + 1 if error.message == message else 1)
        if self.same_404[1] < self.same_404_limit:
            return None
        return _stop_detail(
            EndpointNotFoundError.code,
            f"{self.same_404[1]} requests in a row to {endpoint_of(plan)} got the same 404 ({error.message[:200]}): "
            "check the model block's base_url and the API it speaks",
        )

    def failed(self, error: ProviderUnreachableError) -> bool:
        """One more connection failure; True when the run should stop."""
        self.in_a_row += 1
        return self.in_a_row >= (self.slack if self.answered else STOP_AFTER)

    @staticmethod
    def stop_detail(error: ProviderUnreachableError) -> str:
        return f"{error.message}; rows not sent stay pending: run `batchor apply` again once it is reachable"


def _stop_detail(code: str, message: str) -> str:
    return f"{code}: {message}; rows not sent stay pending: run `batchor apply` again once it answers"


def endpoint_of(plan: StepPlan) -> str:
    """Where a step's requests go, for messages: its base URL (the SDK's variable or the official
    one when the spec gives none), without credentials."""
    url = base_url(plan.provider, plan.base_url) or provider_info(plan.provider).official_url
    return normalise_url(url) if url else f"the {plan.provider} API"
