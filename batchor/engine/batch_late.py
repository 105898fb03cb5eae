"""Batch engine: a create given up for lost that shows at the provider after all.

A create whose answer did not come in time is looked up twice (after a wait longer than the
timeout, and at the end of the step) before its rows are sent again (engine/batch.py). A provider
slower than both lookups still makes that batch: it runs and is billed. So while the step runs,
every round looks for such batches once more; one found is recorded as a batch of its own,
cancelled at once (its rows were sent again; not one found by elimination, which may be another
job's until its results show: engine/batch_collect.py) and then polled and collected like any other, so
whatever it answered before the cancel is stored and its spend recorded, never left paid-for and
unread. Its rows without an answer are not queued again: they were already given back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from batchor.engine.events import Event
from batchor.errors import AuthenticationError, NoApiKeyError, ProviderError
from batchor.providers.batch import RemoteBatch, RowResult
from batchor.state.batches import BatchRecord

if TYPE_CHECKING:
    from batchor.engine.batch_lane import Lane
    from batchor.engine.batch_rows import RowJudge
    from batchor.engine.realtime import WorkItem

LATE_SUFFIX = "-late"


class LateCreates:
    """Creates given up after both lookups (`given_up`), and those found since (`late`)."""

    def __init__(self) -> None:
        self.given_up: dict[str, tuple[BatchRecord, list[str]]] = {}
        self.late: set[str] = set()  # ids of batches recorded for late creates: their rows stay unqueued
        self.remote_ids: set[str] = set()  # their provider ids

    def settle(
        self, judge: RowJudge, item_of: Callable[[str], tuple[WorkItem, bool]], keys: list[str], rows: list[RowResult]
    ) -> tuple[dict[str, str], float]:
        """A late batch's rows: each answer stored and its spend recorded (billed, and as good as
        the answer the rows sent again will get); a row it did not answer is left alone (no
        attempt used, nothing failed): its rows were given back to the queue when it was given up."""
        wanted, outcomes, cost = set(keys), {}, 0.0
        for row in rows:
            if row.key in wanted and row.key not in outcomes and row.completion is not None:
                outcomes[row.key], spent = judge.settle(item_of(row.key)[0], row, False, paid_here=True)
                cost += spent
        return {k: outcomes.get(k, "late_unanswered") for k in keys}, cost

    async def look(self, lane: Lane) -> bool:
        """Look each given-up create up once more; adopt the ones that now exist."""
        changed = False
        for batch_id, (batch, keys) in list(self.given_up.items()):
            try:
                remote = await lane.provider.find(
                    lane.tag_of(batch), lane.ctx.ledger.claimed_remote_ids(batch.provider)
                )
            except (AuthenticationError, NoApiKeyError):
                raise
            except ProviderError:
                continue  # looked up again next round
            if remote is not None:
                del self.given_up[batch_id]
                await self._adopt(lane, batch, keys, remote)
                changed = True
        return changed

    async def _adopt(self, lane: Lane, batch: BatchRecord, keys: list[str], remote: RemoteBatch) -> None:
        late = replace(batch, batch_id=batch.batch_id + LATE_SUFFIX, chunk=lane.chunk, state="intent", extra={})
        lane.chunk += 1
        lane.ctx.ledger.record_intent(late, keys)
        lane.ctx.ledger.mark_submitted(late.batch_id, remote.remote_id, remote.status)
        late.state, late.remote_id, late.remote_status = "submitted", remote.remote_id, remote.status
        lane.live[late.batch_id], lane.keys_of[late.batch_id] = late, keys
        self.late.add(late.batch_id)
        self.remote_ids.add(remote.remote_id)
        if not remote.guessed:  # one found by elimination may be another job's: never cancelled
            try:
                await lane.provider.cancel(remote.remote_id)
            except (AuthenticationError, NoApiKeyError):
                raise
            except ProviderError:
                pass  # not cancelled (ended already, or the call failed): collected as it ends
        lane.due[late.batch_id] = lane.ctx.clock()
        lane.ctx.emit(
            Event(
                "batch_found_late",
                {
                    "step": late.step,
                    "batch_id": late.batch_id,
                    "remote_id": remote.remote_id,
                    "requests": late.requests,
                    "action": "collected as it ends" if remote.guessed else "cancelled, then collected",
                },
            )
        )
