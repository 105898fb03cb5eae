"""Realtime after batch: a step runs realtime while batches of its requests are still in flight.

After `apply --mode batch --no-wait`, a later apply may run the same step realtime (the spec or
`--mode` changed). Sending its rows again would pay for them twice, so rows that sit in a live
batch of the same request family are held back: the batch executor collects those batches (it
polls them to the end, or leaves them in flight with `--no-wait`, as in batch mode) while the other
rows go realtime; rows that come back without an answer (expired, cancelled, retryable errors)
are then sent realtime too.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable, Iterator

from batchor.engine.batch_lane import step_fingerprint
from batchor.engine.types import WorkItem
from batchor.engine.work import StepWork
from batchor.errors import BatchesInFlightError
from batchor.state.base import StateStore
from batchor.state.batches import BatchLedger


async def realtime_after_batches(
    works: list[StepWork],
    store: StateStore,
    send: Callable[[Iterator[WorkItem]], Awaitable[None]],
    collect: Callable[[list[StepWork]], Awaitable[None]],
) -> None:
    """Run realtime `works`; rows held in live batches are collected by `collect`, not sent.

    `collect` runs the batch executor, which only collects for realtime steps and leaves the rows
    still without an answer in the held works' `pending`."""
    held = hold_batched_rows(store, works)
    jobs = [send(_items(works))] if any(w.pending for w in works) else []
    if held:
        jobs.append(collect(held))
    await asyncio.gather(*jobs)
    leftovers = [w for w in held if w.pending]
    if leftovers:
        await send(_items(leftovers))


def refuse_batched_rows(store: StateStore, works: list[StepWork]) -> None:
    """Shared (PostgreSQL) runs do not collect for realtime steps: they refuse instead of paying twice."""
    ledger = BatchLedger(store)
    live = ledger.live_families()
    held = {w.step.name: len(_batched_keys(ledger, w, live)) for w in works if w.step.mode != "batch"}
    held = {name: n for name, n in held.items() if n}
    if held:
        steps = ", ".join(f"{name} ({n:,} rows)" for name, n in held.items())
        raise BatchesInFlightError(
            f"provider batches still running hold rows of realtime step(s) {steps}; sending them "
            "realtime too would pay for them twice",
            hint="collect them first with `batchor apply SPEC "
            "--mode batch` (it waits for the batches), then run realtime again",
        )


def _batched_keys(ledger: BatchLedger, work: StepWork, live: set[str]) -> list[str]:
    """The work's pending keys in a live batch of its request family (`live`: the families
    with one, asked once for the whole wave)."""
    family = step_fingerprint(work.step.key_prefix)
    if family not in live:
        return []
    in_batches: set[str] = set()
    for batch in ledger.live_batches(family):
        in_batches.update(ledger.batch_keys(batch.batch_id))
    return [key for key in work.pending if key in in_batches]


def hold_batched_rows(store: StateStore, works: list[StepWork]) -> list[StepWork]:
    """Move each work's pending keys that sit in a live batch to a copy of the work, returned."""
    ledger = BatchLedger(store)
    live = ledger.live_families()
    held: list[StepWork] = []
    for work in works:
        keys = _batched_keys(ledger, work, live)
        if not keys:
            continue
        part = copy.copy(work)
        part.pending = work.pending.only(keys)
        work.pending = work.pending.without(keys)
        held.append(part)
    return held


def _items(works: list[StepWork]) -> Iterator[WorkItem]:
    for work in works:
        yield from work.items()
