"""The terminal's yes/no question: a Ctrl+C that the kernel hands to another thread still ends it."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

import pytest

# The main thread blocks SIGINT, so the kernel must hand it to the other thread, as it may hand a
# real Ctrl+C to one of DuckDB's or pyarrow's threads. The answer never comes (nothing writes stdin).
_ASKER = """
import signal, sys, threading, time
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
from batchor.cli import ask
try:
    ask.confirm("Run this plan?", default=False)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""


def _asker() -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _ASKER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_question(process: subprocess.Popen[str]) -> None:
    assert process.stderr is not None
    deadline = time.monotonic() + 30
    seen = b""
    while b"Run this plan?" not in seen and time.monotonic() < deadline:
        if select.select([process.stderr], [], [], 0.1)[0]:
            seen += os.read(process.stderr.fileno(), 4096)
    assert b"Run this plan? [y/N]:" in seen


def test_a_ctrl_c_taken_by_another_thread_interrupts_the_question() -> None:
    process = _asker()
    try:
        _wait_for_question(process)
        process.send_signal(signal.SIGINT)
        process.wait(timeout=10)  # stdin stays open: its end would be an answer (an abort) of its own
        assert process.stdout is not None
        out = process.stdout.read()
    finally:
        process.kill()
    assert process.returncode == 130
    assert "interrupted" in out


@pytest.mark.parametrize(
    ("typed", "answer"), [("y\n", "True"), ("NO\n", "False"), ("\n", "False"), ("maybe\ny\n", "True")]
)
def test_the_question_takes_y_n_or_the_default_and_asks_again_otherwise(typed: str, answer: str) -> None:
    script = "from batchor.cli import ask; print(ask.confirm('Go?', default=False))"
    done = subprocess.run([sys.executable, "-c", script], input=typed, capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == answer
    assert done.stderr.count("Go? [y/N]:") == typed.count("\n")


def test_end_of_input_at_the_question_is_an_abort() -> None:
    script = "import typer\nfrom batchor.cli import ask\n"
    script += "try:\n ask.confirm('Go?', default=True)\nexcept typer.Abort:\n print('abort')"
    done = subprocess.run([sys.executable, "-c", script], input="", capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "abort"
    assert "Go? [Y/n]:" in done.stderr
