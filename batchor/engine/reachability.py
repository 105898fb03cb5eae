"""A dead endpoint stops the run fast instead of failing every row `max_attempts` times.

A refused connection or an unknown host name (`ProviderUnreachableError`: nothing was sent)
says nothing about the row: every other request would fail the same way. So, like an unknown
model, a few such failures in a row with no answer in between stop the run; its rows stay
pending for the next apply. An endpoint that has answered during this run gets more slack
(a restart or a network blip fails every request in flight at once), then stops the same way.
"""

from __future__ import annotations

from batchor.errors import ProviderUnreachableError

STOP_AFTER = 3  # connection failures in a row, with no answer yet, that stop the run
STOP_AFTER_ANSWERS_PER_SLOT = 2  # once it answered: this many per concurrency slot (+ STOP_AFTER)
STOP_REASON = "unreachable"


class Reachability:
    """Counts connection failures in a row for one executor; any answer resets the count."""

    def __init__(self, concurrency: int = 1) -> None:
        self.answered = False
        self.in_a_row = 0
        self.slack = STOP_AFTER + STOP_AFTER_ANSWERS_PER_SLOT * max(1, concurrency)

    def reached(self) -> None:
        """The provider answered (any HTTP status: it is there)."""
        self.answered = True
        self.in_a_row = 0

    def failed(self, error: ProviderUnreachableError) -> bool:
        """One more connection failure; True when the run should stop."""
        self.in_a_row += 1
        return self.in_a_row >= (self.slack if self.answered else STOP_AFTER)

    @staticmethod
    def stop_detail(error: ProviderUnreachableError) -> str:
        return f"{error.message}; rows not sent stay pending: run `batchor apply` again once it is reachable"
