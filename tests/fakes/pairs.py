"""A rule-based judge of entity pairs (config `judge_pairs`), for resolve benchmarks and tests.

A structured call whose schema has a boolean `same` and whose prompt has lines `A: <value>` and
`B: <value>` is answered `{"same": ...}` by comparing the two values as a careful but imperfect
model would: case, punctuation, `&`/`and` and legal suffixes (Inc, Corp, LLC...) are ignored; a
typo makes it say no; and when the prompt has a line `(cities: X / Y)` naming one city twice,
two names sharing their first two words are taken for the same company (a model swayed by
context). Everything else is answered as usual.

The same config answers the two other requests of a resolve pipeline by rule: a structured call
whose schema has a string `company` and whose prompt has a line `Note: <lead> from|to|by <name> — ...`
gets `{"company": <name>}` (an extraction); one whose schema has a string `canonical` and whose
prompt lists values as `- <value>` lines gets the first value cleaned (suffixes dropped, words
capitalised, `and` kept lower-case), as a model writing a clean name would.
"""

from __future__ import annotations

import json
import re
from typing import Any

_SUFFIXES = {"inc", "incorporated", "corp", "corporation", "co", "company", "llc", "ltd", "limited", "the", "plc"}
_LINE = re.compile(r"^\s*([AB]):\s*(.+?)\s*$", re.MULTILINE)
_CITIES = re.compile(r"\(cities: (.+?) / (.+?)\)")
_NOTE = re.compile(r"^\s*Note: .*?\b(?:from|to|by) (.+?) — ", re.MULTILINE)
_VALUE = re.compile(r"^\s*- (.+?)\s*$", re.MULTILINE)


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


def _has_string(schema: Any, name: str) -> bool:
    return isinstance(schema, dict) and schema.get("properties", {}).get(name, {}).get("type") in ("string", ["string"])


def entity_answer(prompt: str, schema: Any) -> str | None:
    """A pair judgment, a company extraction or a canonical name, by rule, as JSON text; else None."""
    if (judgment := judged(prompt, schema)) is not None:
        return judgment
    note = _NOTE.search(prompt)
    if note is not None and _has_string(schema, "company"):
        return json.dumps({"company": note.group(1)})
    values = _VALUE.findall(prompt)
    if values and _has_string(schema, "canonical"):
        words = normalized(values[0]).split()
        return json.dumps({"canonical": " ".join(w if w == "and" else w.capitalize() for w in words)})
    return None
