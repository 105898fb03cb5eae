"""Concurrency for the realtime executor: who may take the next row and who may send.

`concurrency` workers take rows from the queue and send them, as before; but a row that has to
wait (a random 429's Retry-After, a backoff) gives up both its place among the readers and its
slot among the senders, so a spare worker takes the next row meanwhile. Rows waiting at once are
bounded (`WAITING_ROWS_PER_SLOT` per slot); a waiting row takes a slot again to send, and no
worker holds a slot while the queue is empty (a pipeline may need a waiting row's answer before
it can queue more).
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

WAITING_ROWS_PER_SLOT = 2


class Seats:
    """The readers' and the senders' semaphores of one executor, `concurrency` places each."""

    def __init__(self, concurrency: int) -> None:
        self.readers = asyncio.Semaphore(concurrency)
        self.slots = asyncio.Semaphore(concurrency)
        self.workers = concurrency * (1 + WAITING_ROWS_PER_SLOT)


class Seat:
    """One worker's places: a reader's while it takes a row, a slot while it sends."""

    def __init__(self, seats: Seats) -> None:
        self.seats = seats
        self.reading = False

    async def next_item(self, queue: asyncio.Queue) -> Any:
        """The next item, with a reader's place and a slot held (None: no more items)."""
        await self.seats.readers.acquire()
        self.reading = True
        item = await queue.get()
        if item is None:
            self._stop_reading()
            return None
        await self.seats.slots.acquire()
        return item

    def leave(self) -> None:
        """The row is done: both places go back."""
        self.seats.slots.release()
        self._stop_reading()

    async def wait(self, sleep: Callable[[float], Awaitable[None]], seconds: float) -> None:
        """Wait `seconds` without a slot or a reader's place: other rows are taken and sent."""
        if seconds <= 0:
            return
        self.seats.slots.release()
        self._stop_reading()
        try:
            await sleep(seconds)
        finally:
            await self.seats.slots.acquire()

    def _stop_reading(self) -> None:
        if self.reading:
            self.reading = False
            self.seats.readers.release()
