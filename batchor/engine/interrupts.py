"""Ctrl+C and SIGTERM during an apply: stop sending, then stop waiting, never die mid-record.

From the moment a run record exists until it is finished, batchor owns SIGINT and SIGTERM, so a
signal can never end the process between two writes of the record:

- the first signal stops sending; calls in flight get `grace_s` to finish and be stored;
- a second signal (or the end of the grace) cancels the calls still in flight;
- further signals are counted and ignored: finishing the record takes moments.

Inside the event loop the handler only schedules work on the loop (thread-safe), so a signal
never runs engine code at an arbitrary point of a coroutine.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from types import FrameType
from typing import Any

from batchor.engine.types import StopSignal

SIGNALS = (signal.SIGINT, signal.SIGTERM)
DEFAULT_GRACE_S = 10.0  # calls in flight after the first signal; then they are cancelled


def grace_seconds() -> float:
    """How long calls in flight may finish after the first signal (BATCHOR_GRACE_S, default 10)."""
    return float(os.environ.get("BATCHOR_GRACE_S") or DEFAULT_GRACE_S)


class Interrupts:
    """Installed for the whole apply (a context manager); the runner attaches its loop to it."""

    def __init__(self, stop: StopSignal, *, enabled: bool = True, grace_s: float = DEFAULT_GRACE_S) -> None:
        self.stop, self.grace_s = stop, grace_s
        self.enabled = enabled and threading.current_thread() is threading.main_thread()
        self.count = 0
        self.hard = False  # in-flight calls are being cancelled
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "Interrupts":
        if self.enabled:
            for sig in SIGNALS:
                self._previous[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    # --- the event loop's side ------------------------------------------------------------------

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Signals from now on act on `loop` (the apply's one event loop)."""
        self._loop = loop
        if self.count:  # a signal came before the loop ran: start its grace now
            loop.call_soon(self._on_loop, self.count)

    def detach(self) -> None:
        self._loop = None

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._on_loop, self.count)
        else:  # between waves or while finishing: nothing in flight to cancel
            self.stop.stop("interrupted", _detail(signum))

    def _on_loop(self, count: int) -> None:
        self.stop.stop("interrupted", "stopped by signal")
        if count >= 2:
            self.cancel_in_flight()
        elif self._loop is not None:
            self._loop.call_later(self.grace_s, self.cancel_in_flight)

    def cancel_in_flight(self) -> None:
        """Cancel every task of the loop until none is left waiting (a task's cleanup may wait
        on a queue whose consumers were cancelled too: it is cancelled again)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        self.hard = True
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.call_later(0.05, self._cancel_again)

    def _cancel_again(self) -> None:
        if self._loop is not None and self.hard:
            self.cancel_in_flight()


def _detail(signum: int) -> str:
    return f"stopped by {signal.Signals(signum).name}"


def off_running_loop(fn: Any, stop: StopSignal) -> StopSignal:
    """Run `fn` here, or on a worker thread when this thread already runs an event loop (Jupyter).

    There, KeyboardInterrupt reaches this thread: it stops the run gracefully instead of killing it.
    """
    if not _loop_running():
        return fn()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="batchor-apply", daemon=True)
    thread.start()
    while thread.is_alive():
        try:
            thread.join(0.2)
        except KeyboardInterrupt:
            stop.stop("interrupted", "stopped by KeyboardInterrupt")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
