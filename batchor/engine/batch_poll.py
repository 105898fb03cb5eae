"""When to poll live batches next: soon after a submit, then at a pace that follows each batch.

A provider batch takes from seconds to a day, and nothing says in advance which. So the wait
before the next round follows each live batch's age (a batch running for an hour is not done
in a second): the first poll comes `FIRST_POLL_S` after a submit, later ones every `AGE_SHARE`
of the batch's age, so a batch is seen done at most about a quarter of its run time late, never
more than `batch_poll_max_s` late. When the provider reports progress (rows done of rows in the
batch: OpenAI's and Anthropic's request counts), the batch's expected end is extrapolated from
it, and the next poll comes no later than that (nor sooner than a sixteenth of the batch's age).
A batch left from an earlier apply is polled at once (the executor's first round).
"""

from __future__ import annotations

from dataclasses import dataclass

FIRST_POLL_S = 0.5  # the first poll after a submit, at most (a small batch may be done by then)
AGE_SHARE = 0.25  # later polls: every quarter of the batch's age (seen done at most ~25 % late)
PROGRESS_SHARE = 1 / 16  # an expected end never brings polls closer than this share of the age


@dataclass(frozen=True, slots=True)
class PollPace:
    """Spec limits: `batch_poll_s` (the shortest wait, when under FIRST_POLL_S) and `batch_poll_max_s`."""

    poll_s: float
    poll_max_s: float

    @property
    def floor(self) -> float:
        return min(self.poll_s, FIRST_POLL_S)

    def wait(self, now: float, batches: list[tuple[float | None, float | None]]) -> float:
        """Seconds until the next round, from each live batch's (created, expected end) clock times."""
        waits = [self._wait_for(now, created, expected_end) for created, expected_end in batches]
        return min(self.poll_max_s, min(waits, default=self.floor))

    def _wait_for(self, now: float, created: float | None, expected_end: float | None) -> float:
        age = max(0.0, now - (created or now))
        wait = max(self.floor, age * AGE_SHARE)
        if expected_end is not None:
            # a straggler row must not turn an hour-long batch into a poll every second
            wait = min(wait, max(self.floor, age * PROGRESS_SHARE, expected_end - now))
        return wait


def expected_end(now: float, created: float | None, done: int | None, total: int | None) -> float | None:
    """When a batch should end if it keeps its pace so far (None: no progress reported yet)."""
    if not created or not done or not total or done >= total:
        return None
    age = max(0.0, now - created)
    return now + age * (total - done) / done
