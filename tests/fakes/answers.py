"""Deterministic answers: the same request content always yields the same reply.

Tests and benchmarks compare runs and count duplicates, so nothing here may depend on time,
process or Python's randomised ``hash()``: every choice comes from a CRC of the prompt and the
position in the schema.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import zlib
from collections.abc import Callable
from typing import Any

WORDS = ("alpha", "bravo", "cedar", "delta", "ember", "fjord", "gamma", "harbor", "iris", "jade")
MAX_DEPTH = 8  # past this, objects keep only required keys and arrays their minimum length


def prompt_key(text: str) -> str:
    """Key of a prompt in the server's ``by_prompt`` stats (tests compute it the same way)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def estimate_tokens(text: str) -> int:
    return len(text) // 4 + 1


def text_answer(prompt: str, words: Any = None) -> str:
    """An echo of the prompt; with ``words`` = [median, sigma], a reply whose word count follows a
    log-normal distribution (drawn from the prompt's CRC, so the same prompt gets the same reply)."""
    if not words:
        return "echo: " + prompt[:40]
    median, sigma = float(words[0]), float(words[1])
    crc = zlib.crc32(prompt.encode())
    uniform = ((crc & 0xFFFF) + 0.5) / 65536, ((crc >> 16) + 0.5) / 65536
    normal = math.sqrt(-2 * math.log(uniform[0])) * math.cos(2 * math.pi * uniform[1])  # Box-Muller
    count = max(1, round(median * math.exp(sigma * normal)))
    return " ".join(WORDS[(crc + i) % len(WORDS)] for i in range(count))


def schema_answer(schema: Any, seed: str, free_text: Callable[[str], str] | None = None) -> Any:
    """A value valid against ``schema`` (the JSON Schema subset structured outputs use);
    ``free_text(path)``, when given, writes strings without a format or enum (see lengths.py)."""
    return _Generator(schema, seed, free_text).value(schema, "$", 0)


def malformed_text(schema: Any, seed: str) -> str:
    """Structured output a model got wrong: cut-off JSON or JSON of the wrong shape."""
    value = schema_answer(schema, seed)
    if zlib.crc32(seed.encode()) % 2:
        text = json.dumps(value)
        return text[: max(1, len(text) // 2)] if len(text) > 2 else "{"
    return json.dumps(violating_value(schema, value))


def violating_value(schema: Any, value: Any) -> Any:
    """``value`` changed so that it no longer matches ``schema`` (still JSON, still an object
    when the schema wants one, as a forced tool call's ``input`` always is)."""
    if isinstance(value, dict) and value:
        key = next(iter(value))
        prop = schema.get("properties", {}).get(key, {}) if isinstance(schema, dict) else {}
        return {**value, key: _wrong_for(prop)}
    if isinstance(value, dict):
        return {"malformed": _wrong_for({})}
    return {"malformed": value}


def plausible_mistake(schema: Any, value: Any, seed: str) -> Any:
    """``value`` with one mistake a model makes, picked by ``seed`` among those the schema allows:
    a required field left out, a number above its maximum, a word outside its enum, a string
    past its maxLength, a list past its maxItems (constraints an adapter moved into descriptions
    count). The answer keeps its length and shape; without any such field, ``violating_value``."""
    props = schema.get("properties", {}) if isinstance(schema, dict) and isinstance(value, dict) else {}
    mistakes: list[tuple[str, Any]] = (
        [(name, _MISSING) for name in schema.get("required", []) if name in value] if props else []
    )
    for name, prop in props.items():
        wrong = _broken_rule(_with_described(prop), value.get(name)) if name in value else _MISSING
        if wrong is not _MISSING:
            mistakes.append((name, wrong))
    if not mistakes:
        return violating_value(schema, value)
    name, wrong = mistakes[_mixed(seed) % len(mistakes)]
    if wrong is _MISSING:
        return {k: v for k, v in value.items() if k != name}
    return {**value, name: wrong}


_MISSING = object()


def _broken_rule(prop: Any, current: Any) -> Any:
    """A value of the field's type breaking one of its rules (`_MISSING` when it has none)."""
    if not isinstance(prop, dict):
        return _MISSING
    if isinstance(prop.get("maximum"), (int, float)) and not isinstance(current, bool):
        return prop["maximum"] + 2 if "integer" in _types(prop) else prop["maximum"] * 1.5 + 1
    if prop.get("enum") and all(isinstance(v, str) for v in prop["enum"]):
        return "neutral" if "neutral" not in prop["enum"] else "unknown"
    if isinstance(prop.get("maxLength"), int) and isinstance(current, str):
        return (current + " ") * (prop["maxLength"] // max(1, len(current)) + 1)
    if isinstance(prop.get("maxItems"), int) and isinstance(current, list) and current:
        return (current * (prop["maxItems"] // len(current) + 1))[: prop["maxItems"] + 1]
    return _MISSING


def mistake_drawn(text: str, share: float) -> bool:
    """Whether an answer to a request reading ``text`` is a mistake, for a ``share`` of requests:
    a draw from the text alone (a re-ask reads the rejected answer and the feedback too, so it
    draws again), never from time or order."""
    return share > 0 and (_mixed("mistake:" + text) + 0.5) / 2**32 < share


def _mixed(seed: str) -> int:
    """A 32-bit draw from ``seed`` (CRC32 with a multiply-xorshift finaliser: CRC alone is linear)."""
    x = zlib.crc32(seed.encode())
    x = ((x ^ (x >> 16)) * 0x45D9F3B) & 0xFFFFFFFF
    x = ((x ^ (x >> 16)) * 0x45D9F3B) & 0xFFFFFFFF
    return x ^ (x >> 16)


def _wrong_for(schema: Any) -> Any:
    types = _types(schema) if isinstance(schema, dict) else []
    return 12345 if "string" in types else "malformed"


class _Generator:
    def __init__(self, root: Any, seed: str, free_text: Callable[[str], str] | None = None) -> None:
        self.root = root
        self.base = zlib.crc32(seed.encode())
        self.free_text = free_text

    def pick(self, path: str) -> int:
        # CRC32 is linear (sibling paths would get correlated picks); a multiply-xorshift
        # finaliser decorrelates them cheaply.
        x = zlib.crc32(path.encode(), self.base)
        x = ((x ^ (x >> 16)) * 0x45D9F3B) & 0xFFFFFFFF
        x = ((x ^ (x >> 16)) * 0x45D9F3B) & 0xFFFFFFFF
        return x ^ (x >> 16)

    def value(self, schema: Any, path: str, depth: int) -> Any:
        if schema is True or schema is None or schema == {}:
            return WORDS[self.pick(path) % len(WORDS)]
        if schema is False:
            return None
        schema = _with_described(self.resolve(schema))
        if "const" in schema:
            return schema["const"]
        if schema.get("enum"):
            return schema["enum"][self.pick(path) % len(schema["enum"])]
        for key in ("anyOf", "oneOf"):
            if schema.get(key):
                return self.value(_merge_siblings(schema, key), path, depth)
        if schema.get("allOf"):
            return self.value(_flatten_all_of(schema, self.resolve), path, depth)
        kind = _pick_type(schema)
        maker = getattr(self, f"_{kind}", None)
        return maker(schema, path, depth) if maker else None

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        seen = 0
        while isinstance(schema, dict) and "$ref" in schema and seen < 32:
            target = _pointer(self.root, schema["$ref"])
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **rest} if isinstance(target, dict) else target
            seen += 1
        return schema

    def _object(self, schema: dict[str, Any], path: str, depth: int) -> dict[str, Any]:
        props: dict[str, Any] = schema.get("properties") or {}
        required = list(schema.get("required") or [])
        names = list(props) if depth < MAX_DEPTH else [n for n in props if n in required]
        names += [n for n in required if n not in names]
        return {n: self.value(props.get(n, {}), f"{path}.{n}", depth + 1) for n in names}

    def _array(self, schema: dict[str, Any], path: str, depth: int) -> list[Any]:
        low = int(schema.get("minItems", 0))
        high = int(schema.get("maxItems", max(low, 3)))
        count = low if depth >= MAX_DEPTH else min(max(low, 1 + self.pick(path) % 3), high)
        prefix = schema.get("prefixItems") or []
        items = schema.get("items", {})
        out: list[Any] = []
        for i in range(count):
            item_schema = prefix[i] if i < len(prefix) else items
            item = self.value(item_schema, f"{path}[{i}]", depth + 1)
            for retry in range(8):  # uniqueItems: try other picks before giving up
                if not schema.get("uniqueItems") or item not in out:
                    break
                item = self.value(item_schema, f"{path}[{i}]#{retry}", depth + 1)
            out.append(item)
        return out

    def _string(self, schema: dict[str, Any], path: str, depth: int) -> str:
        n = self.pick(path)
        text = _formatted(schema.get("format"), n) or (
            self.free_text(path) if self.free_text else f"{WORDS[n % len(WORDS)]}-{n % 1000}"
        )
        low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
        if len(text) < low:
            text += "x" * (low - len(text))
        return text[: int(high)] if high is not None else text

    def _integer(self, schema: dict[str, Any], path: str, depth: int) -> int:
        low, high = _bounds(schema, step=1)
        low_i = int(-(-low // 1))  # ceil
        high_i = int(high // 1)
        value = low_i + self.pick(path) % max(1, high_i - low_i + 1)
        step = schema.get("multipleOf")
        if step and isinstance(step, int) and value % step:
            value += step - value % step
            value = value if value <= high_i else value - step
        return value

    def _number(self, schema: dict[str, Any], path: str, depth: int) -> float:
        low, high = _bounds(schema, step=0.01)
        fraction = (self.pick(path) % 1000) / 1000
        value = round(low + fraction * (high - low), 2)
        return min(max(value, low), high)

    def _boolean(self, schema: dict[str, Any], path: str, depth: int) -> bool:
        return self.pick(path) % 2 == 0

    def _null(self, schema: dict[str, Any], path: str, depth: int) -> None:
        return None


_DESCRIBED = re.compile(r"\(([^()]*)\)\s*$")
_DESCRIBED_KEY = re.compile(r"(^|, )([A-Za-z]+): ")


def _with_described(schema: Any) -> Any:
    """Constraints an adapter moved into the description as ``(minimum: 1, maximum: 5)`` (as
    batchor does for Anthropic) taken into account, as a model reading the description would."""
    if not isinstance(schema, dict) or not isinstance(schema.get("description"), str):
        return schema
    found = _DESCRIBED.search(schema["description"])
    if not found:
        return schema
    try:
        extra = json.loads("{" + _DESCRIBED_KEY.sub(r'\1"\2": ', found.group(1)) + "}")
    except ValueError:
        return schema
    return {**extra, **schema} if isinstance(extra, dict) else schema


def _pick_type(schema: dict[str, Any]) -> str:
    types = _types(schema)
    if types:
        non_null = [t for t in types if t != "null"]
        return non_null[0] if non_null else "null"
    if "properties" in schema or "required" in schema:
        return "object"
    if "items" in schema or "prefixItems" in schema:
        return "array"
    if any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")):
        return "number"
    return "string"


def _types(schema: dict[str, Any]) -> list[str]:
    kind = schema.get("type")
    if kind is None:
        return []
    return [t.lower() for t in kind] if isinstance(kind, list) else [str(kind).lower()]


def _bounds(schema: dict[str, Any], step: float) -> tuple[float, float]:
    low, high = schema.get("minimum"), schema.get("maximum")
    ex_low, ex_high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    # Draft 4 writes exclusivity as booleans next to minimum/maximum; 2020-12 as numbers.
    if ex_low is True and low is not None:
        low = low + step
    elif isinstance(ex_low, (int, float)) and not isinstance(ex_low, bool):
        low = max(low, ex_low + step) if low is not None else ex_low + step
    if ex_high is True and high is not None:
        high = high - step
    elif isinstance(ex_high, (int, float)) and not isinstance(ex_high, bool):
        high = min(high, ex_high - step) if high is not None else ex_high - step
    if low is None:
        low = min(0, high - 100) if high is not None else 0
    if high is None:
        high = low + 100
    return float(low), float(max(low, high))


def _formatted(fmt: str | None, n: int) -> str | None:
    if fmt == "date":
        return f"2024-{1 + n % 12:02d}-{1 + n % 28:02d}"
    if fmt == "date-time":
        return f"2024-{1 + n % 12:02d}-{1 + n % 28:02d}T{n % 24:02d}:00:00Z"
    if fmt == "time":
        return f"{n % 24:02d}:{n % 60:02d}:00"
    if fmt == "email":
        return f"user{n % 1000}@example.com"
    if fmt in ("uri", "url"):
        return f"https://example.com/{n % 1000}"
    if fmt == "uuid":
        h = f"{n:08x}" * 4
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-8{h[17:20]}-{h[20:32]}"
    return None


def _merge_siblings(schema: dict[str, Any], key: str) -> dict[str, Any]:
    """First alternative of anyOf/oneOf, keeping keywords written beside it."""
    rest = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
    first = schema[key][0]
    return {**rest, **first} if isinstance(first, dict) else first


def _flatten_all_of(schema: dict[str, Any], resolve: Any) -> dict[str, Any]:
    merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
    for part in schema["allOf"]:
        part = resolve(part) if isinstance(part, dict) else {}
        for key, value in part.items():
            if key == "properties":
                merged["properties"] = {**merged.get("properties", {}), **value}
            elif key == "required":
                merged["required"] = [*merged.get("required", []), *value]
            else:
                merged.setdefault(key, value)
    return merged


def _pointer(root: Any, ref: str) -> Any:
    if not ref.startswith("#"):
        return {}  # remote references: answer with an unconstrained value
    node = root
    for token in ref[1:].split("/")[1:] if ref != "#" else []:
        token = token.replace("~1", "/").replace("~0", "~")
        node = node[int(token)] if isinstance(node, list) else node.get(token, {})
    return node
