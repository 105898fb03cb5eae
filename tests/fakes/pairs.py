"""A rule-based judge of entity pairs (config `judge_pairs`), for resolve benchmarks and tests.

A structured call whose schema has a boolean `same` and whose prompt has lines `A: <value>` and
`B: <value>` is answered `{"same": ...}` by comparing the two values as a careful but imperfect
model would: case, punctuation, `&`/`and` and legal suffixes (Inc, Corp, LLC...) are ignored; a
typo makes it say no; and when the prompt has a line `(cities: X / Y)` naming one city twice,
two names sharing their first two words are taken for the same company (a model swayed by
context). Everything else is answered as usual.
"""

from __future__ import annotations

import json
import re
from typing import Any

_SUFFIXES = {"inc", "incorporated", "corp", "corporation", "co", "company", "llc", "ltd", "limited", "the", "plc"}
_LINE = re.compile(r"^\s*([AB]):\s*(.+?)\s*$", re.MULTILINE)
_CITIES = re.compile(r"\(cities: (.+?) / (.+?)\)")


def normalized(value: str) -> str:
    words = re.sub(r"[^a-z0-9 ]", " ", value.lower().replace("&", " and ")).split()
    return " ".join(w for w in words if w not in _SUFFIXES)


def judged(prompt: str, schema: Any) -> str | None:
    """`{"same": ...}` as JSON text for a pair question, else None."""
    if not isinstance(schema, dict) or schema.get("properties", {}).get("same", {}).get("type") != "boolean":
        return None
    found = dict(_LINE.findall(prompt))
    if "A" not in found or "B" not in found:
        return None
    a, b = normalized(found["A"]), normalized(found["B"])
    cities = _CITIES.search(prompt)
    swayed = cities is not None and cities.group(1) == cities.group(2) and a.split()[:2] == b.split()[:2]
    return json.dumps({"same": a == b or swayed})
