"""The expected length of an answer, in tokens, before any answer exists (the plan's heuristic).

A structured answer is mostly fixed by its schema: property names, punctuation, enum values, numbers
and booleans are a few tokens each; only free strings and list lengths vary. So the expected
length is summed over the schema: an enum costs its values' average length, a bounded string half
its `maxLength`, an unbounded one a short phrase (a longer one when its name asks for prose), a
list the middle of its `minItems`..`maxItems`. Once a step has answers, plan/estimate.py uses their
measured length instead. Token lengths use ~4 characters per token (o200k on English JSON).
"""

from __future__ import annotations

import json
import math
from typing import Any

from batchor.schema.core import resolve_ref

TEXT_ANSWER_TOKENS = 150
"""A free-text answer with no schema: a short paragraph."""
PHRASE_TOKENS = 6  # an unbounded string: a label or a short phrase
PROSE_TOKENS = 45  # an unbounded string whose name asks for prose (summary, reason, ...)
PROSE_NAMES = (
    "summary",
    "explanation",
    "reason",
    "rationale",
    "justification",
    "description",
    "comment",
    "reply",
    "response",
    "answer",
    "notes",
    "feedback",
    "message",
    "text",
    "analysis",
    "evidence",
)
LIST_ITEMS = 3  # items in a list without maxItems
_MAX_DEPTH = 6


def expected_answer_tokens(schema: dict[str, Any] | None) -> int:
    """Expected tokens of an answer: of a JSON answer to `schema`, or of free text when None."""
    if schema is None:
        return TEXT_ANSWER_TOKENS
    return max(1, math.ceil(_Estimator(schema).value(schema, "", 0)))


def _chars(text: str) -> float:
    return max(1.0, len(text) / 4)


class _Estimator:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root

    def value(self, node: Any, name: str, depth: int) -> float:
        node = self._deref(node)
        if depth > _MAX_DEPTH or not isinstance(node, dict):
            return 2
        if "const" in node:
            return _chars(json.dumps(node["const"]))
        if node.get("enum"):
            return sum(_chars(json.dumps(v)) for v in node["enum"]) / len(node["enum"])
        branches = [b for b in node.get("anyOf") or node.get("oneOf") or [] if self._kind(b) != "null"]
        if branches:
            return sum(self.value(b, name, depth + 1) for b in branches) / len(branches)
        kind = self._kind(node)
        if kind == "object":
            return self._object(node, depth)
        if kind == "array":
            return self._array(node, name, depth)
        if kind == "string":
            return self._string(node, name)
        return {"boolean": 1, "null": 1, "integer": 1 if _small(node) else 2}.get(kind, 3)

    def _object(self, node: dict[str, Any], depth: int) -> float:
        props = node.get("properties") or {}
        # `"name":` costs its quotes and colon (~2) plus the name; each member a separator.
        members = sum(2 + _chars(key) + self.value(sub, key, depth + 1) for key, sub in props.items())
        return 2 + members + max(0, len(props) - 1)

    def _array(self, node: dict[str, Any], name: str, depth: int) -> float:
        low = int(node.get("minItems", 0))
        high = node.get("maxItems")
        count = (low + int(high)) / 2 if high is not None else max(low, LIST_ITEMS)
        item = self.value(node.get("items", {}), name, depth + 1)
        return 2 + count * (item + 1)

    def _string(self, node: dict[str, Any], name: str) -> float:
        if node.get("format") in ("date", "date-time", "time", "email", "uuid", "uri"):
            return 8
        if "maxLength" in node:
            low = int(node.get("minLength", 0))
            return 2 + (low + int(node["maxLength"])) / 2 / 4
        lowered = name.lower()
        prose = any(word in lowered for word in PROSE_NAMES)
        return 2 + (PROSE_TOKENS if prose else PHRASE_TOKENS)

    def _kind(self, node: Any) -> str:
        node = self._deref(node)
        if not isinstance(node, dict):
            return "any"
        kinds = node.get("type", "object" if "properties" in node else "string")
        if isinstance(kinds, list):
            return next((k for k in kinds if k != "null"), "null")
        return str(kinds)

    def _deref(self, node: Any) -> Any:
        for _ in range(16):
            if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)):
                return node
            try:
                node = resolve_ref(self.root, node["$ref"])
            except LookupError:
                return node
        return node


def _small(node: dict[str, Any]) -> bool:
    """An integer bounded below 1,000 in size is one token."""
    low, high = node.get("minimum"), node.get("maximum")
    return low is not None and high is not None and abs(low) < 1000 and abs(high) < 1000
