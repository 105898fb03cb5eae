"""Deterministic sample answers for a JSON schema, for the offline mock provider.

`sample_value(schema, seed)` returns a value valid against `schema` that varies with `seed`:
every choice (enum member, number, string, array length) comes from a hash of the seed and the
location in the value, so the same row always gets the same answer and runs are reproducible.
"""

from __future__ import annotations

import copy
import hashlib
import math
import random
import re
import uuid
from typing import Any

from batchor.schema.core import compile_schema, resolve_ref

try:  # the stdlib's own regex parser drives pattern samples; private, so optional
    from re import _constants as sre  # type: ignore[attr-defined]
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    sre = sre_parse = None

_MAX_DEPTH = 4  # below this, only required properties and minimal arrays (recursive schemas)
_TYPE_HINTS = (
    ("object", ("properties", "required", "additionalProperties", "minProperties")),
    ("array", ("items", "prefixItems", "minItems", "maxItems", "contains")),
    ("number", ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")),
)


def sample_value(schema: dict[str, Any] | bool, seed: str) -> Any:
    """A value valid against `schema`, chosen deterministically from `seed`."""
    root = schema if isinstance(schema, dict) else {}
    return _Sampler(root, seed).value(schema, (), 0)


class _Sampler:
    """One sampling pass: the root (for $ref) and the seed every choice is hashed with."""

    def __init__(self, root: dict[str, Any], seed: str) -> None:
        self.root = root
        self.seed = seed

    def pick(self, path: tuple[Any, ...], count: int) -> int:
        """A number in [0, count) fixed by the seed and the location."""
        key = "\x1f".join([self.seed, *map(str, path)]).encode()
        return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") % max(count, 1)

    def value(self, node: Any, path: tuple[Any, ...], depth: int) -> Any:
        if node is False:
            raise ValueError(f"no value satisfies the schema `false` at {list(path)}")
        if not isinstance(node, dict):
            return self.string({}, path)
        node = self.expand(node)
        if "const" in node:
            return copy.deepcopy(node["const"])
        if "enum" in node:
            return self.member(node, path)
        for key in ("anyOf", "oneOf"):
            if key in node:
                return self.branch(node, key, path, depth)
        kind = _main_type(node)
        if kind == "object":
            return self.object(node, path, depth)
        return self.array(node, path, depth) if kind == "array" else self.scalar(node, kind, path)

    def scalar(self, node: dict[str, Any], kind: str, path: tuple[Any, ...]) -> Any:
        if kind in ("integer", "number"):
            return _number(node, kind == "integer", self.pick(path, 1 << 30))
        if kind == "boolean":
            return self.pick(path, 2) == 1
        return None if kind == "null" else self.string(node, path)

    def expand(self, node: dict[str, Any]) -> dict[str, Any]:
        """Inline `$ref` and `allOf` so the rest sees one flat schema."""
        for _ in range(16):
            if isinstance(node.get("$ref"), str):
                target = resolve_ref(self.root, node["$ref"])
                rest = {k: v for k, v in node.items() if k != "$ref"}
                node = _merge(target if isinstance(target, dict) else {}, rest)
            elif "allOf" in node:
                parts = [p for p in node["allOf"] if isinstance(p, dict)]
                node = {k: v for k, v in node.items() if k != "allOf"}
                for part in parts:
                    node = _merge(node, part)
            else:
                return node
        return node

    def member(self, node: dict[str, Any], path: tuple[Any, ...]) -> Any:
        """An enum member of the node's type; null only when it is the sole choice."""
        kinds = node.get("type")
        members = [v for v in node["enum"] if kinds is None or _has_type(v, kinds)] or node["enum"]
        members = [v for v in members if v is not None] or members
        return copy.deepcopy(members[self.pick(path, len(members))])

    def branch(self, node: dict[str, Any], key: str, path: tuple[Any, ...], depth: int) -> Any:
        """The first branch whose sample satisfies the whole node (anyOf/oneOf)."""
        base = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
        check = compile_schema(self.root).evolve(schema=node)
        first = None
        for option in node[key]:
            if not isinstance(option, dict):
                continue
            candidate = self.value(_merge(base, option), path, depth)
            if check.is_valid(candidate):
                return candidate
            first = candidate if first is None else first
        return first

    def object(self, node: dict[str, Any], path: tuple[Any, ...], depth: int) -> dict[str, Any]:
        props = node.get("properties") or {}
        wanted = list(node.get("required") or [])
        for name in props:
            if name not in wanted and depth < _MAX_DEPTH and self.pick((*path, name, "?"), 3):
                wanted.append(name)
        for name in list(wanted):  # dependentRequired: including a key may require others
            needs = node.get("dependentRequired", {}).get(name, [])
            wanted += [d for d in needs if d not in wanted]
        spare = (n for n in props if n not in wanted)
        while len(wanted) < node.get("minProperties", 0):
            wanted.append(next(spare, f"extra_{len(wanted)}"))
        extra = node.get("additionalProperties", True)
        return {name: self.value(props.get(name, extra), (*path, name), depth + 1) for name in wanted}

    def array(self, node: dict[str, Any], path: tuple[Any, ...], depth: int) -> list[Any]:
        low, high = node.get("minItems", 0), node.get("maxItems", math.inf)
        prefix, items = node.get("prefixItems", []), node.get("items", True)
        if depth >= _MAX_DEPTH:
            count = low
        else:
            spread = int(min(max(low, 3), high)) - max(low, 1) + 1
            count = int(min(max(low, 1) + self.pick(path, spread), high))
        if items is False:
            count = min(count, len(prefix))
        out: list[Any] = []
        for i in range(count * 4):  # extra tries for uniqueItems
            if len(out) == count:
                break
            sub = prefix[len(out)] if len(out) < len(prefix) else items
            candidate = self.value(sub, (*path, i), depth + 1)
            if not (node.get("uniqueItems") and candidate in out):
                out.append(candidate)
        return out

    def string(self, node: dict[str, Any], path: tuple[Any, ...]) -> str:
        name = next((p for p in reversed(path) if isinstance(p, str)), "value")
        n = self.pick(path, 10_000)
        text = _formatted(node.get("format"), name, n)
        if text is None and "pattern" in node:
            text = _from_pattern(node["pattern"], n)
        if text is None:
            text = f"sample {name} {n % 1000}"
        low, high = node.get("minLength", 0), node.get("maxLength")
        if high is not None and len(text) > high:
            text = text[:high]
        return text + "x" * max(0, low - len(text))


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Both schemas' constraints in one (properties and required are combined)."""
    out = {**base, **extra}
    if "properties" in base and "properties" in extra:
        out["properties"] = {**base["properties"], **extra["properties"]}
    if "required" in base and "required" in extra:
        out["required"] = list(dict.fromkeys([*base["required"], *extra["required"]]))
    return out


def _main_type(node: dict[str, Any]) -> str:
    kinds = node.get("type")
    if isinstance(kinds, list):
        return next((k for k in kinds if k != "null"), "null")
    if kinds is not None:
        return kinds
    return next((kind for kind, keys in _TYPE_HINTS if any(k in node for k in keys)), "string")


def _has_type(value: Any, kinds: str | list[str]) -> bool:
    names = [kinds] if isinstance(kinds, str) else kinds
    is_int = isinstance(value, int) and not isinstance(value, bool)
    checks = {
        "null": value is None,
        "boolean": isinstance(value, bool),
        "integer": is_int or (isinstance(value, float) and value.is_integer()),
        "number": is_int or isinstance(value, float),
        "string": isinstance(value, str),
        "array": isinstance(value, list),
        "object": isinstance(value, dict),
    }
    return any(checks.get(name, False) for name in names)


def _number(node: dict[str, Any], integer: bool, n: int) -> int | float:
    """A number within the bounds (and a multiple of multipleOf when given)."""
    low, high = _bounds(node, integer)
    step = node.get("multipleOf")
    if step:
        first, last = math.ceil(low / step), math.floor(high / step)
        for k in range(first + n % max(last - first + 1, 1), first - 1, -1):
            value = k * step if integer or isinstance(step, int) else round(k * step, 10)
            whole = not integer or float(value).is_integer()
            if low <= value <= high and whole and (value / step).is_integer():
                return int(value) if integer else value
    if integer:
        return int(low + n % (high - low + 1)) if high >= low else int(low)
    value = round(low + (high - low) * (n % 101) / 100, 2)
    return value if low <= value <= high else (low + high) / 2


def _bounds(node: dict[str, Any], integer: bool) -> tuple[float, float]:
    """Inclusive bounds: exclusive ones are nudged inward (by 1 for integers)."""
    nudge = 1 if integer else 0.01
    low = max(node.get("minimum", -math.inf), node.get("exclusiveMinimum", -math.inf) + nudge)
    high = min(node.get("maximum", math.inf), node.get("exclusiveMaximum", math.inf) - nudge)
    if integer:
        low = low if math.isinf(low) else math.ceil(low)
        high = high if math.isinf(high) else math.floor(high)
    if math.isinf(low) and math.isinf(high):
        return 0, 100
    return (high - 100 if math.isinf(low) else low), (low + 100 if math.isinf(high) else high)


def _formatted(fmt: str | None, name: str, n: int) -> str | None:
    day, hour, minute = n % 28 + 1, n % 24, n % 60
    samples = {
        "date": f"2024-{n % 12 + 1:02d}-{day:02d}",
        "date-time": f"2024-{n % 12 + 1:02d}-{day:02d}T{hour:02d}:{minute:02d}:00Z",
        "time": f"{hour:02d}:{minute:02d}:00Z",
        "duration": f"P{day}D",
        "email": f"{name.lower()}.{n}@example.com",
        "hostname": f"host{n}.example.com",
        "ipv4": f"192.0.2.{n % 254 + 1}",
        "ipv6": f"2001:db8::{n % 65535 + 1:x}",
        "uuid": str(uuid.UUID(int=n * 7919 + 1, version=4)),
    }
    for web in ("uri", "url", "iri", "uri-reference", "iri-reference"):
        samples[web] = f"https://example.com/{re.sub(r'[^A-Za-z0-9_-]', '-', name)}/{n}"
    return samples.get(fmt) if fmt else None


def _from_pattern(pattern: str, n: int) -> str | None:
    """A string matching `pattern` for common regex shapes; None when that fails."""
    if sre_parse is None:  # pragma: no cover
        return None
    try:
        text = _emit(sre_parse.parse(pattern), random.Random(n))
    except (re.error, _Unsupported, IndexError, ValueError):
        return None
    return text if re.search(pattern, text) else None


class _Unsupported(Exception):
    pass


def _emit(parsed: Any, rng: random.Random) -> str:
    out = []
    for op, arg in parsed:
        if op is sre.LITERAL:
            out.append(chr(arg))
        elif op is sre.NOT_LITERAL:
            out.append("a" if arg != ord("a") else "b")
        elif op is sre.ANY:
            out.append("x")
        elif op is sre.IN:
            out.append(_one_of_set(arg, rng))
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
            low, high, sub = arg
            count = rng.randint(low, max(low, min(high, low + 3)))
            out.extend(_emit(sub, rng) for _ in range(count))
        elif op is sre.SUBPATTERN:  # (group, add_flags, del_flags, pattern)
            out.append(_emit(arg[-1], rng))
        elif op is sre.ATOMIC_GROUP:
            out.append(_emit(arg, rng))
        elif op is sre.BRANCH:
            out.append(_emit(rng.choice(arg[1]), rng))
        elif op is not sre.AT:  # anchors emit nothing
            raise _Unsupported(str(op))
    return "".join(out)


_CATEGORY_CHARS = {
    "CATEGORY_DIGIT": "0123456789", "CATEGORY_NOT_DIGIT": "abcxyz",
    "CATEGORY_WORD": "abcxyz019_", "CATEGORY_NOT_WORD": " -.",
    "CATEGORY_SPACE": " ", "CATEGORY_NOT_SPACE": "abc019",
}  # fmt: skip


def _one_of_set(items: list[tuple[Any, Any]], rng: random.Random) -> str:
    """A character from a [...] set; for negated sets, a common one outside it."""
    chars = ""
    for op, arg in items:
        if op is sre.LITERAL:
            chars += chr(arg)
        elif op is sre.RANGE:
            chars += "".join(map(chr, range(arg[0], min(arg[1], arg[0] + 25) + 1)))
        elif op is sre.CATEGORY:
            chars += _CATEGORY_CHARS.get(str(arg), "")
    if items and items[0][0] is sre.NEGATE:
        outside = [c for c in "abcxyzABC019_- " if c not in chars]
        return rng.choice(outside) if outside else "~"
    if not chars:
        raise _Unsupported("empty character set")
    return rng.choice(chars)
