"""`batchor cancel`: stop a job's provider batches and record where each one stands.

Cancelling is a request: providers finish or drop the rows in progress, then end the batch as
cancelled, keeping every answer already made. The batch stays live in the state, so the next
`apply` polls it, stores those answers and queues only the rows without one.
"""

from __future__ import annotations

from typing import Any

from batchor.engine.batch import batch_provider_for
from batchor.engine.batch_calls import RetryingCalls, Sleep
from batchor.errors import ProviderError
from batchor.providers.batch import BatchProvider, BatchTag
from batchor.state.base import StateStore
from batchor.state.batches import BatchLedger, BatchRecord, batch_summary

CANCEL_TIMEOUT_S = 60.0


async def cancel_batches(store: StateStore, job_id: str, sleep: Sleep | None = None) -> list[dict[str, Any]]:
    """Each call retried like the engine's (rate limits, 5xx, timeouts); a batch whose cancel still
    fails is left as it is, with the reason in its `remote_status`: the next apply collects it."""
    ledger = BatchLedger(store)
    clients: dict[tuple[str, str], BatchProvider] = {}
    try:
        for batch in ledger.job_batches(job_id, live_only=True):
            key = (batch.provider, batch.connection)
            if key not in clients:
                clients[key] = batch_provider_for(batch.provider, batch.connection_dict(), CANCEL_TIMEOUT_S)
                clients[key].calls = RetryingCalls(sleep)
            try:
                await _cancel_one(ledger, clients[key], batch)
            except ProviderError as exc:
                ledger.mark_polled(batch.batch_id, f"cancel failed: {exc.message[:200]}")
    finally:
        for client in clients.values():
            await client.aclose()
    return [batch_summary(b) for b in ledger.job_batches(job_id)]


async def _cancel_one(ledger: BatchLedger, provider: BatchProvider, batch: BatchRecord) -> None:
    if batch.state == "intent":  # a create of unknown outcome: find it first
        tag = BatchTag(batch.batch_id, batch.job_id, batch.step, batch.chunk, batch.requests, batch.created_s)
        remote = await provider.find(tag, ledger.claimed_remote_ids(batch.provider))
        if remote is None or remote.guessed:
            # nothing remote (the next apply gives its rows back to the queue), or a batch found by
            # size and time only: perhaps another job's, never cancelled; the next apply checks it
            return
        ledger.mark_submitted(batch.batch_id, remote.remote_id, remote.status)
        batch.remote_id = remote.remote_id
    if batch.state not in ("intent", "submitted") or not batch.remote_id:
        return  # already ended remotely: nothing to cancel, the next apply collects it
    remote = await provider.cancel(batch.remote_id)  # refused (e.g. already ended): the next poll tells
    if remote.ended:
        ledger.mark_ended(batch.batch_id, remote.state, remote.status, None)
    else:
        ledger.mark_polled(batch.batch_id, remote.status)
