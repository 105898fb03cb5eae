"""Colour for plan output on a terminal; plain text everywhere else.

Colour is on only when the stream is a TTY, `NO_COLOR` is unset (https://no-color.org) and
`TERM` is not `dumb`; pipes, files and CI logs get the plain text, byte for byte.

Text a row or an answer carries is data: control characters in it (an escape sequence that would
retitle the terminal, clear it or hide a line, a carriage return, bidi overrides) are shown as
`\x1b`-style escapes by `terminal_safe`, never acted on.
"""

from __future__ import annotations

import os
import re
from typing import IO

import typer

_RULES: tuple[tuple[re.Pattern[str], dict[str, object]], ...] = (
    (re.compile(r"^(Plan \S+|step \S+|Plan view .*)"), {"bold": True}),
    (re.compile(r"ABOVE budget|NO UPPER BOUND|cost unknown \(no price\)|no price"), {"fg": "red", "bold": True}),
    (re.compile(r"within budget"), {"fg": "green"}),
    (re.compile(r"\$[\d,]+\.\d+"), {"fg": "cyan"}),
    (re.compile(r"\b\d[\d,]* to run\b"), {"fg": "yellow", "bold": True}),
    (re.compile(r"\b\d[\d,]* cached\b"), {"fg": "green"}),
    (re.compile(r"note: .*"), {"dim": True}),
)


_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """`text` with control characters (all but tab and newline) written as visible escapes."""
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def use_colour(stream: IO[str]) -> bool:
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def coloured(text: str, stream: IO[str]) -> str:
    """`text` with its key figures coloured when `stream` is a terminal (control characters it
    carries made visible, everywhere)."""
    text = terminal_safe(text)
    if not use_colour(stream):
        return text
    return "\n".join(_paint(line) for line in text.split("\n"))


def _paint(line: str) -> str:
    stripped = line.lstrip()
    indent = line[: len(line) - len(stripped)]
    for pattern, style in _RULES:
        stripped = pattern.sub(lambda m, s=style: typer.style(m.group(0), **s), stripped)  # type: ignore[misc]
    return indent + stripped
