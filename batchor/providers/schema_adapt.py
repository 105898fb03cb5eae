"""Provider schema adaptation: what each API accepts, and what it will not enforce.

Each provider supports a different subset of JSON Schema; a provider's registry entry names whose
subset it takes (`ProviderInfo.schema`: OpenAI-compatible servers and Azure OpenAI's, Bedrock
Anthropic's). `adapt_schema` returns the copy to
send plus notes naming every constraint the provider will not enforce; those are checked only
by the local validation of each answer against the original schema (`core.validator_for`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

from batchor.errors import ProviderSchemaError
from batchor.providers import REGISTRY
from batchor.schema.core import ANNOTATIONS, Path, children, field_label, resolve_ref, walk

_TYPED_BY = ("type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref")
_SILENT = frozenset({"$schema", "$id", "$comment", "$anchor", "$dynamicAnchor", "$vocabulary"})
_UNSENT_ANNOTATIONS = ANNOTATIONS - {"title", "description"}

# OpenAI strict mode: accepted keywords; ones to leave out (rejected or unclear); formats.
_OPENAI_KEEP = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const",
    "anyOf", "$ref", "$defs", "definitions", "title", "description", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems",
    "maxItems",
})  # fmt: skip
_OPENAI_LOCAL = frozenset({
    "minLength", "maxLength", "uniqueItems", "minProperties", "maxProperties", "propertyNames",
})  # fmt: skip
_OPENAI_FORMATS = frozenset({
    "date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid",
})  # fmt: skip
# Anthropic: the rest goes into the description (as its SDK does), minItems only as 0 or 1.
_ANTHROPIC_KEEP = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const",
    "anyOf", "allOf", "$ref", "$defs", "definitions", "title", "description", "format",
    "minItems",
})  # fmt: skip
_ANTHROPIC_FORMATS = _OPENAI_FORMATS | {"uri"}
# Gemini `response_json_schema`: the keywords google-genai documents as supported.
_GEMINI_KEEP = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "prefixItems", "enum",
    "anyOf", "oneOf", "$ref", "$defs", "title", "description", "format", "minItems",
    "maxItems", "minimum", "maximum",
})  # fmt: skip
_GEMINI_FORMATS = frozenset({"date-time", "date", "time"})


@dataclass(frozen=True)
class AdaptedSchema:
    """The schema to send to one provider, and what the provider will not enforce.

    `strict` False means the provider cannot enforce this schema at all: `schema` is then the
    original, to send as guidance only, and local validation is the only check.
    """

    schema: dict[str, Any]
    strict: bool
    notes: tuple[str, ...] = ()


@dataclass
class _Adapting:
    provider: str
    root: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)

    def note(self, path: Path, text: str) -> None:
        self.notes.append(f"{field_label(path)}: {text}")

    def block(self, path: Path, text: str) -> None:
        self.blockers.append(f"{field_label(path)}: {text}")

    def result(self, original: dict[str, Any]) -> AdaptedSchema:
        if not self.blockers:
            return AdaptedSchema(self.root, True, tuple(self.notes))
        summary = (
            f"{self.provider} cannot enforce this schema, so it is sent as guidance only "
            "(not strict); batchor validates every answer locally"
        )
        return AdaptedSchema(copy.deepcopy(original), False, (*self.blockers, summary))


def adapt_schema(schema: dict[str, Any], provider: str) -> AdaptedSchema:
    """The copy of `schema` to send to `provider`, with notes; `schema` is never mutated."""
    name = provider.lower()
    if name == "mock":
        return AdaptedSchema(copy.deepcopy(schema), True)
    info = REGISTRY.get(name)
    family = info.schema if info is not None and info.schema else name  # ProviderInfo.schema: whose subset
    if family not in _ADAPTERS:
        note = f"{provider} has no known structured-output support: nothing is enforced remotely"
        return AdaptedSchema(copy.deepcopy(schema), False, (f"{note}; validated locally",))
    _require_object_root(schema, provider)
    ctx = _Adapting(provider, copy.deepcopy(schema))
    _ADAPTERS[family](ctx)
    adapted = ctx.result(schema)
    if family == "openai" and info is not None and not info.first_party and adapted.strict:
        extra = f"{provider} servers differ in how fully they honour strict mode; validated locally"
        adapted = AdaptedSchema(adapted.schema, True, (*adapted.notes, extra))
    return adapted


def _require_object_root(schema: dict[str, Any], provider: str) -> None:
    if schema.get("type") not in ("object", ["object"]):
        raise ProviderSchemaError(
            f"{provider} structured outputs need `type: object` at the schema root",
            hint="put the value in an object: {type: object, properties: {answer: ...}}",
        )


# --- OpenAI (and OpenAI-compatible servers) --------------------------------------------------


def _openai(ctx: _Adapting) -> None:
    walk(ctx.root, lambda node, path: _openai_node(ctx, node, path))


def _openai_node(ctx: _Adapting, node: dict[str, Any], path: Path) -> None:
    _one_of_as_any_of(ctx, node, path)
    left_out = {}
    for key in list(node):
        if key in _UNSENT_ANNOTATIONS:
            del node[key]
        elif key in _OPENAI_LOCAL or (key == "format" and node[key] not in _OPENAI_FORMATS):
            left_out[key] = node.pop(key)
        elif key not in _OPENAI_KEEP:
            ctx.block(path, f"`{key}` is not supported by OpenAI strict mode")
    if left_out:
        unsent = _pairs(left_out)
        ctx.note(path, f"{unsent} not sent (unsupported in strict mode); validated locally")
    _block_untyped(ctx, node, path, "strict mode needs a `type`")
    if _is_object(node):
        _openai_object(ctx, node, path)


def _openai_object(ctx: _Adapting, node: dict[str, Any], path: Path) -> None:
    """Strict mode: closed objects whose keys are all required; optional ones become nullable."""
    free_form = _is_free_form(node)
    if not _close_object(node):
        ctx.block(path, "allows extra keys; strict mode needs additionalProperties: false")
    elif free_form:
        ctx.block(path, "is a free-form object; strict mode needs its keys under `properties`")
    props = node.get("properties") or {}
    optional = [key for key in props if key not in node.get("required", ())]
    for key in optional:
        props[key] = _nullable(ctx.root, props[key])
    node["required"] = list(props)
    if optional:
        names = ", ".join(f"`{key}`" for key in optional)
        ctx.note(path, f"optional {names} sent as required and nullable; null reads as absent")


def _nullable(root: dict[str, Any], sub: Any) -> Any:
    """`sub` widened to accept null, which is how strict mode spells an optional property."""
    if Draft202012Validator(root).evolve(schema=sub).is_valid(None):
        return sub
    kind = sub.get("type")
    if "anyOf" in sub and kind is None and sub.keys() <= {"anyOf", "title", "description"}:
        return {**sub, "anyOf": [*sub["anyOf"], {"type": "null"}]}
    if kind is None or any(key in sub for key in ("$ref", "anyOf", "allOf", "const")):
        return {"anyOf": [sub, {"type": "null"}]}
    widened = {**sub, "type": [*([kind] if isinstance(kind, str) else kind), "null"]}
    if "enum" in sub:
        widened["enum"] = [*sub["enum"], None]
    return widened


# --- Anthropic -------------------------------------------------------------------------------


_SERVED_BY = {"bedrock": "Bedrock"}  # Anthropic's schema subset on another service


def _anthropic(ctx: _Adapting) -> None:
    walk(ctx.root, lambda node, path: _anthropic_node(ctx, node, path))
    for ref in _recursive_refs(ctx.root):
        ctx.block((), f"`{ref}` is recursive, which Anthropic structured outputs do not support")


def _anthropic_node(ctx: _Adapting, node: dict[str, Any], path: Path) -> None:
    _one_of_as_any_of(ctx, node, path)
    moved = {key: node.pop(key) for key in list(node) if _anthropic_moves(key, node[key])}
    for key in _SILENT & node.keys():
        del node[key]
    if moved:
        text = ", ".join(f"{key}: {_json(value)}" for key, value in moved.items())
        described = node.get("description")
        node["description"] = f"{described} ({text})" if described else f"({text})"
    constraints = {key: value for key, value in moved.items() if key not in ANNOTATIONS}
    if constraints:
        ctx.note(path, f"{_pairs(constraints)} moved into the description, not enforced by "
                 f"{_SERVED_BY.get(ctx.provider, 'Anthropic')}; validated locally")  # fmt: skip
    _block_untyped(ctx, node, path, "Anthropic structured outputs need a `type`")
    if _is_object(node):
        _anthropic_object(ctx, node, path)


def _anthropic_object(ctx: _Adapting, node: dict[str, Any], path: Path) -> None:
    """Anthropic needs additionalProperties: false on every object."""
    if _is_free_form(node):
        ctx.block(path, "is a free-form object; Anthropic only accepts listed properties")
    elif not _close_object(node):
        ctx.note(path, "extra keys are allowed, but Anthropic will only produce the listed ones")
    node["additionalProperties"] = False


def _anthropic_moves(key: str, value: Any) -> bool:
    if key == "format":
        return value not in _ANTHROPIC_FORMATS
    if key == "minItems":
        return value not in (0, 1)
    return key not in _ANTHROPIC_KEEP and key not in _SILENT


# --- Gemini ----------------------------------------------------------------------------------


def _gemini(ctx: _Adapting) -> None:
    _definitions_to_defs(ctx)
    walk(ctx.root, lambda node, path: _gemini_node(ctx, node, path))
    for ref in _recursive_refs(ctx.root):
        ctx.note((), f"`{ref}` is recursive; Gemini unrolls it only a few levels")


def _gemini_node(ctx: _Adapting, node: dict[str, Any], path: Path) -> None:
    if "$ref" in node:  # Gemini: nothing but `$...` keys next to a $ref
        dropped = {key: node.pop(key) for key in list(node) if not key.startswith("$")}
    else:
        if "const" in node and _is_str_or_number(node["const"]):
            node["enum"] = [node.pop("const")]
        dropped = {key: node.pop(key) for key in list(node) if _gemini_drops(key, node[key])}
        _gemini_enum(ctx, node, path)
    constraints = {key: value for key, value in dropped.items() if key not in ANNOTATIONS}
    if constraints:
        removed = _pairs(constraints)
        ctx.note(path, f"{removed} removed (not supported by Gemini); validated locally")
    if "oneOf" in node:
        ctx.note(path, "`oneOf` is read as `anyOf` by Gemini; exactly-one is validated locally")


def _gemini_drops(key: str, value: Any) -> bool:
    if key == "format":
        return value not in _GEMINI_FORMATS
    return key not in _GEMINI_KEEP


def _gemini_enum(ctx: _Adapting, node: dict[str, Any], path: Path) -> None:
    """Gemini enums hold strings and numbers: a nullable enum becomes anyOf [enum, null]."""
    values = node.get("enum")
    if values is None or all(_is_str_or_number(v) for v in values):
        return
    rest = [v for v in node.pop("enum") if _is_str_or_number(v)]
    if None in values and len(rest) == len(values) - 1 and "anyOf" not in node:
        kinds = [k for k in _as_list(node.pop("type", [])) if k != "null"]
        node["anyOf"] = [{"type": kinds[0], "enum": rest} if len(kinds) == 1 else {"enum": rest},
                         {"type": "null"}]  # fmt: skip
        return
    ctx.note(path, f"enum {_json(values)} removed (Gemini enums hold strings and numbers only); "
             "validated locally")  # fmt: skip


def _definitions_to_defs(ctx: _Adapting) -> None:
    """Gemini knows `$defs` only: move root `definitions` there and repoint the refs."""
    definitions = ctx.root.pop("definitions", None)
    if not definitions:
        return
    defs = ctx.root.setdefault("$defs", {})
    if defs.keys() & definitions.keys():
        ctx.block((), "`definitions` and `$defs` share names; keep one of the two")
    defs.update({k: v for k, v in definitions.items() if k not in defs})

    def repoint(node: dict[str, Any], path: Path) -> None:
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/definitions/"):
            node["$ref"] = "#/$defs/" + ref.removeprefix("#/definitions/")

    walk(ctx.root, repoint)


# --- shared ----------------------------------------------------------------------------------

_ADAPTERS: dict[str, Callable[[_Adapting], None]] = {
    "openai": _openai,
    "anthropic": _anthropic,
    "gemini": _gemini,
}


def _one_of_as_any_of(ctx: _Adapting, node: dict[str, Any], path: Path) -> None:
    if "oneOf" in node and "anyOf" not in node:
        node["anyOf"] = node.pop("oneOf")
        ctx.note(path, "`oneOf` sent as `anyOf`; exactly-one is validated locally")


def _block_untyped(ctx: _Adapting, node: dict[str, Any], path: Path, why: str) -> None:
    """Schemas that accept any value (`{}` or `true`) cannot be constrained by a provider."""
    if not any(key in node for key in _TYPED_BY):
        ctx.block(path, f"accepts any value, but {why}")
    for sub_path, sub in children(node, path):  # `true` subschemas are not visited as nodes
        if sub is True and sub_path[-1] != "additionalProperties":
            ctx.block(sub_path, f"accepts any value, but {why}")


def _close_object(node: dict[str, Any]) -> bool:
    """Set additionalProperties: false; False when the schema had allowed extra keys."""
    was_closed = node.get("additionalProperties", False) is False
    node["additionalProperties"] = False
    return was_closed


def _is_free_form(node: dict[str, Any]) -> bool:
    """An object with no listed keys that is not explicitly closed: any keys go."""
    return "properties" not in node and node.get("additionalProperties", True) is not False


def _is_object(node: dict[str, Any]) -> bool:
    return "object" in _as_list(node.get("type")) or "properties" in node


def _recursive_refs(root: dict[str, Any]) -> list[str]:
    """Local refs whose target reaches itself again (`#/$defs/Node` inside Node)."""
    edges: dict[str, set[str]] = {}
    for ref in _refs_in(root):
        try:
            edges[ref] = _refs_in(resolve_ref(root, ref))
        except LookupError:
            continue
    return sorted(ref for ref in edges if ref in _reachable(ref, edges))


def _refs_in(node: Any) -> set[str]:
    found: set[str] = set()

    def collect(sub: dict[str, Any], _: Path) -> None:
        if isinstance(sub.get("$ref"), str):
            found.add(sub["$ref"])

    walk(node, collect)
    return found


def _reachable(start: str, edges: dict[str, set[str]]) -> set[str]:
    seen: set[str] = set()
    todo = list(edges.get(start, ()))
    while todo:
        ref = todo.pop()
        if ref not in seen:
            seen.add(ref)
            todo.extend(edges.get(ref, ()))
    return seen


def _as_list(value: Any) -> list[Any]:
    return [] if value is None else value if isinstance(value, list) else [value]


def _is_str_or_number(value: Any) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)


def _json(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:79] + "…"


def _pairs(values: dict[str, Any]) -> str:
    return ", ".join(f"{key} {_json(value)}" for key, value in values.items())
