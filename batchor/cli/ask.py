"""A yes/no question on the terminal that a Ctrl+C always interrupts.

A Ctrl+C sends SIGINT to the process, and the kernel may hand it to any thread that does not
block it: DuckDB's and pyarrow's native threads are alive by the time a plan is shown. Python
then only notes the signal; a main thread blocked in `input()` (click's `confirm`) keeps waiting
for a line, so the command hung at "Run this plan?" until Enter. Waiting for the line in short
`select` slices returns to Python between them, where the noted Ctrl+C is raised as usual.
"""

from __future__ import annotations

import select
import sys

import typer

_SLICE_S = 0.1


def confirm(question: str, default: bool) -> bool:
    """Ask `question [y/N]` (or `[Y/n]`) on stderr until it gets an answer; Enter takes the default.
    End of input raises typer.Abort, as click's prompt did; the CLI says "interrupted" for it and for
    a Ctrl+C."""
    choices = "[Y/n]" if default else "[y/N]"
    while True:
        sys.stderr.write(f"{question} {choices}: ")
        sys.stderr.flush()
        answer = _line().strip().lower()
        if not answer:
            return default
        if answer in ("y", "yes"):
            return True
        if answer in ("n", "no"):
            return False
        sys.stderr.write("please answer y or n\n")


def _line() -> str:
    while not select.select([sys.stdin], [], [], _SLICE_S)[0]:
        pass
    line = sys.stdin.readline()
    if not line:
        raise typer.Abort()
    return line
