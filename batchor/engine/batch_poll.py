"""When to poll each live batch next: soon after its submit, then at a pace that follows it.

A provider batch takes from seconds to a day, and nothing says in advance which. So each live
batch keeps its own next poll time (a round polls only the batches due, so an hour-old batch is
not polled at the pace of one submitted a second ago): the first poll comes `FIRST_POLL_S` after
its create returned, later ones every `AGE_SHARE` of its age, so a batch is seen done at most
about a quarter of its run time late, never more than `batch_poll_max_s` late, and never two
polls of one batch closer than the floor (`FIRST_POLL_S`, or `batch_poll_s` when smaller).

An expected end brings polls forward: from the provider's progress (rows done of rows in the
batch: OpenAI's and Anthropic's request counts, extrapolated), else from history (how long the
state's earlier batches of the same provider, model and about the same size took: Gemini reports
no progress, and a repeated job is the common case). The next poll then comes no later than that
end (nor sooner than a sixteenth of the batch's age); once it is passed, polls back off from it
(a quarter of the time since), up to the age rule. A batch left from an earlier apply is polled
at once (its lane marks it due when it opens).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

FIRST_POLL_S = 0.5  # the first poll after a submit, and the floor between two polls of one batch
AGE_SHARE = 0.25  # later polls: every quarter of the batch's age (seen done at most ~25 % late)
PROGRESS_SHARE = 1 / 16  # an expected end never brings polls closer than this share of the age
DUE_SLACK_S = 0.005  # a batch due this soon is polled in the round already under way


@dataclass(frozen=True, slots=True)
class PollPace:
    """Spec limits: `batch_poll_s` (the floor, when under FIRST_POLL_S) and `batch_poll_max_s`."""

    poll_s: float
    poll_max_s: float

    @property
    def floor(self) -> float:
        return min(self.poll_s, FIRST_POLL_S)

    def wait(self, now: float, started: float | None, expected_end: float | None = None) -> float:
        """Seconds from `now` (a poll of the batch just made, or its submit) to its next poll."""
        age = max(0.0, now - (started or now))
        wait = max(self.floor, age * AGE_SHARE)
        if expected_end is not None:
            # ahead of the expected end: poll at it; past it: back off from it. A straggler row
            # must not turn an hour-long batch into a poll every second.
            target = expected_end - now if expected_end > now else (now - expected_end) * AGE_SHARE
            wait = min(wait, max(self.floor, age * PROGRESS_SHARE, target))
        return min(self.poll_max_s, wait)


def expected_end(now: float, created: float | None, done: int | None, total: int | None) -> float | None:
    """When a batch should end if it keeps its pace so far (None: no progress reported yet)."""
    if not created or not done or not total or done >= total:
        return None
    age = max(0.0, now - created)
    return now + age * (total - done) / done


def typical_seconds(durations: list[float]) -> float | None:
    """How long a batch like the earlier ones should take: their median (one slow batch, say one
    that expired after 24 h, does not move it), None without history."""
    found = [d for d in durations if d > 0]
    return statistics.median(found) if found else None
