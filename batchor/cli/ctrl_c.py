"""How the command line meets a Ctrl+C outside a run: asyncio's CancelledError matched without
importing asyncio up front, and a note that a Ctrl+C reached a command (cli/main.py `run` says
"interrupted" for it, where Typer would exit 130 silently).
"""

from __future__ import annotations

import signal
import threading
from typing import Any


def cancelled() -> type[BaseException]:
    """asyncio's CancelledError, imported only when an exception is being matched (asyncio is slow
    to import and `--help` never needs it)."""
    import asyncio

    return asyncio.CancelledError


class CtrlC:
    """Notes a Ctrl+C that reached a command as KeyboardInterrupt. Typer turns one into a bare exit
    130 and says nothing, so a Ctrl+C while a command plans or reads went unexplained. A run owns
    SIGINT itself (engine/interrupts.py) and says what it stopped; this handler is not called then."""

    def __init__(self) -> None:
        self.seen = False
        self._previous: Any = None

    def __enter__(self) -> "CtrlC":
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def _on_sigint(self, signum: int, frame: Any) -> None:
        self.seen = True
        signal.default_int_handler(signum, frame)
