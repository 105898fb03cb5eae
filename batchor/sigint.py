"""A Ctrl+C held back while a native module initialises, then delivered as usual.

DuckDB's C++ module init calls back into Python (it imports modules); a KeyboardInterrupt raised
there becomes a C++ exception the init cannot handle, and the process aborts (exit -6, SIGABRT,
with a traceback) instead of saying "interrupted" with exit 130. `ctrl_c_deferred` swaps the
SIGINT handler for one that only notes the signal, and blocks SIGINT on the thread, for the
duration; afterwards the previous handler is put back and a noted Ctrl+C is raised again, so it
reaches the code that would have seen it (the CLI's "interrupted", a run's graceful stop).

The handler swap is what makes it whole: a process-directed SIGINT may be taken by any thread
that does not block it (pyarrow's, a thread pool's), and Python then runs the handler on the
main thread wherever it is, inside the init too. Only the main thread runs signal handlers, so
elsewhere there is nothing to defer.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def ctrl_c_deferred() -> Iterator[None]:
    """Within the block, a Ctrl+C is noted, not raised; it is raised again right after the block."""
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        yield  # not the thread handlers run on, or SIGINT ignored / left to the OS: nothing raised
        return
    noted: list[int] = []

    def note(signum: int, frame: Any) -> None:
        noted.append(signum)

    signal.signal(signal.SIGINT, note)
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)  # a pending Ctrl+C arrives here: noted
        signal.signal(signal.SIGINT, previous)
        if noted:
            signal.raise_signal(signal.SIGINT)  # to the previous handler: KeyboardInterrupt, or a run's stop
