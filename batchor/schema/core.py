"""Output schemas: checked at plan time, used to validate every answer, adapted per provider.

A step's `output.schema` is plain JSON Schema (2020-12). Each provider enforces a different
subset of it, so `adapt_schema` builds what the provider accepts and says, in notes, what it will
not enforce. Every answer is then validated locally against the ORIGINAL schema
(`validator_for`), so a provider with weaker support never weakens the result.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import re
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any
from urllib.parse import unquote

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError as JsonSchemaError
from jsonschema.protocols import Validator

from batchor.errors import SchemaError

Path = tuple[str | int, ...]

# Keywords whose value is one subschema, a list of subschemas, or a name -> subschema mapping.
_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains",
        "propertyNames", "unevaluatedItems", "unevaluatedProperties")  # fmt: skip
_MANY = ("allOf", "anyOf", "oneOf", "prefixItems")
_NAMED = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
# Keywords that describe but never constrain: dropping them loses no validation.
ANNOTATIONS = frozenset({
    "$schema", "$id", "$comment", "$anchor", "$dynamicAnchor", "$vocabulary", "default",
    "examples", "deprecated", "readOnly", "writeOnly", "contentMediaType", "contentEncoding",
    "contentSchema", "title", "description",
})  # fmt: skip
_KNOWN = ANNOTATIONS | set(_ONE) | set(_MANY) | set(_NAMED) | {
    "type", "enum", "const", "required", "$ref", "$dynamicRef", "format", "pattern",
    "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "minItems", "maxItems", "uniqueItems", "minContains", "maxContains",
    "minProperties", "maxProperties", "dependentRequired",
}  # fmt: skip
_CONSTRAINTS = sorted(_KNOWN - ANNOTATIONS)  # a typo in one of these silently drops a rule
# Keys users bring from OpenAPI that JSON Schema silently ignores.
_FOREIGN = {"nullable": 'JSON Schema has no `nullable`: use `type: [<type>, "null"]`'}


# --- walking ---------------------------------------------------------------------------------


def children(node: dict[str, Any], path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Yield (path, subschema) for each direct subschema of `node`."""
    for key in _ONE:
        if key in node:
            yield (*path, key), node[key]
    for key in _MANY:
        for i, sub in enumerate(node.get(key) or ()):
            yield (*path, key, i), sub
    for key in _NAMED:
        for name, sub in (node.get(key) or {}).items():
            yield (*path, key, name), sub


def walk(node: Any, visit: Callable[[dict[str, Any], Path], None], path: Path = ()) -> None:
    """Call `visit(subschema, path)` on every object subschema, children before parents.

    Children first, so a visitor may rewrite a node (wrap it, rename keys) after its subschemas
    were handled, without the rewrite being visited again.
    """
    if not isinstance(node, dict):
        return
    for sub_path, sub in list(children(node, path)):
        walk(sub, visit, sub_path)
    visit(node, path)


def resolve_ref(root: dict[str, Any], ref: str) -> Any:
    """The subschema a local `$ref` ("#" or "#/json/pointer") points to; LookupError if none."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        raise LookupError(f"`{ref}` is not a local reference (remote schemas are not fetched)")
    node: Any = root
    for raw in ref[2:].split("/"):
        part = unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise LookupError(f"`{ref}` points to nothing in this schema")
    if not isinstance(node, dict | bool):
        raise LookupError(f"`{ref}` points to a value that is not a schema")
    return node


def _deref(root: dict[str, Any], node: Any) -> Any:
    """Follow a chain of `$ref`-only nodes (bounded, since refs may be recursive)."""
    for _ in range(16):
        if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)):
            return node
        try:
            node = resolve_ref(root, node["$ref"])
        except LookupError:
            return node
    return node


def _loc(where: str, path: Path) -> str:
    return where + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def field_label(path: Path) -> str:
    """A schema location as users name fields (`tags[].label`), for notes."""
    out, keys = "", iter(path)
    for key in keys:
        if key == "properties":
            out += f".{next(keys)}"
        elif key in _NAMED:
            out += f".{key}.{next(keys)}"
        elif key == "items":
            out += "[]"
        else:
            out += f"[{key}]" if isinstance(key, int) else f".{key}"
    return f"`{out.lstrip('.')}`" if out else "the root object"


# --- checking a schema (plan time) -----------------------------------------------------------


def check_schema(schema: dict[str, Any], *, where: str) -> None:
    """Raise SchemaError unless `schema` can be used as a structured output schema.

    `where` names the spec location (e.g. "steps.classify.output.schema") for the message.
    """
    if not isinstance(schema, dict):
        raise SchemaError(
            f"{where}: the output schema must be a mapping, got {type(schema).__name__}",
            hint="write a JSON Schema object such as {type: object, properties: {...}}",
        )
    _check_metaschema(schema, where)
    _check_root(schema, where)
    walk(schema, lambda node, path: _check_node(schema, node, _loc(where, path)))


_META_VALID: set[str] = set()  # schemas (canonical JSON) the metaschema accepted: its verdict never changes


def _check_metaschema(schema: dict[str, Any], where: str) -> None:
    """Validate against the 2020-12 metaschema (~20 ms: every plan and apply checks each step's
    schema again, so an accepted one is remembered; a refused one is checked again for its message)."""
    try:
        text = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):
        text = ""  # not JSON data (e.g. a YAML date): checked every time
    if text and text in _META_VALID:
        return
    try:
        Draft202012Validator.check_schema(schema)
        if text and len(_META_VALID) < 4096:
            _META_VALID.add(text)
    except JsonSchemaError as exc:
        raise SchemaError(
            f"{_loc(where, tuple(exc.absolute_path))}: not a valid JSON Schema: {_short(exc.message)}",
            hint=_type_guess(exc)
            or "fix that keyword (JSON Schema 2020-12, https://json-schema.org/understanding-json-schema)",
        ) from None


_JSON_TYPES = ("string", "integer", "number", "boolean", "object", "array", "null")
_TYPE_ALIASES = {"int": "integer", "float": "number", "double": "number", "bool": "boolean", "str": "string",
                 "dict": "object", "list": "array", "none": "null"}  # fmt: skip


def _type_guess(exc: JsonSchemaError) -> str | None:
    """'did you mean ...' for a `type:` that is not one of JSON Schema's seven (`int`, `str`...)."""
    path = tuple(exc.absolute_path)
    if not path or path[-1] != "type" or not isinstance(exc.instance, str):
        return None
    written = exc.instance.lower()
    guess = _TYPE_ALIASES.get(written) or next(iter(difflib.get_close_matches(written, _JSON_TYPES, n=1)), None)
    listed = ", ".join(_JSON_TYPES)
    return f"did you mean `type: {guess}`? (the types are {listed})" if guess else f"use one of {listed}"


def _check_root(schema: dict[str, Any], where: str) -> None:
    if schema.get("type") in ("object", ["object"]):
        return
    found = f"`type: {json.dumps(schema['type'])}`" if "type" in schema else "no `type`"
    raise SchemaError(
        f"{where}: the schema root must be `type: object` (structured outputs answer with a "
        f"JSON object), but it has {found}",
        hint="put the value in an object: {type: object, properties: {answer: <your schema>}, required: [answer]}",
    )


def _check_node(root: dict[str, Any], node: dict[str, Any], where: str) -> None:
    ref = node.get("$ref")
    if isinstance(ref, str):
        try:
            resolve_ref(root, ref)
        except LookupError as exc:
            raise SchemaError(
                f"{where}: $ref cannot be resolved: {exc}",
                hint="define the target under `$defs` in this schema and point to it as `#/$defs/<Name>`",
            ) from None
    _check_keywords(node, where)
    _check_required(node, where)


def _check_keywords(node: dict[str, Any], where: str) -> None:
    """Catch typos of constraints and OpenAPI-isms: JSON Schema ignores unknown keys silently."""
    for key in node:
        if key in _FOREIGN:
            raise SchemaError(f"{where}: `{key}` is not a JSON Schema keyword", hint=_FOREIGN[key])
        if key in _KNOWN:
            continue
        close = difflib.get_close_matches(key, _CONSTRAINTS, n=1, cutoff=0.8)
        if close:
            raise SchemaError(
                f"{where}: unknown keyword `{key}` (it would be ignored)",
                hint=f"did you mean `{close[0]}`?",
            )


def _check_required(node: dict[str, Any], where: str) -> None:
    props = node.get("properties")
    if node.get("additionalProperties") is not False or not isinstance(props, dict):
        return
    missing = [name for name in node.get("required", ()) if name not in props]
    if missing:
        raise SchemaError(
            f"{where}: `required` lists {_names(missing)}, which `properties` does not define; "
            "with additionalProperties: false no answer can be valid",
            hint="add them under `properties` or fix the names in `required`",
        )


# --- validating answers (every row) ----------------------------------------------------------


def _is_date_time(value: object) -> bool:
    """RFC 3339-ish date-time, checked with the stdlib (jsonschema's needs an extra package)."""
    if not isinstance(value, str):
        return True
    if len(value) < 11 or value[10] not in "Tt":
        return False
    try:
        datetime.fromisoformat(value.upper())
    except ValueError:
        return False
    return True


# A fixed set of format checks, so validation does not depend on which optional packages exist.
_FORMATS = FormatChecker(formats=("date", "email", "ipv4", "ipv6", "uuid", "regex"))
_FORMATS.checks("date-time")(_is_date_time)
_COMPILED: dict[str, Validator] = {}
_CHECKS: dict[str, Callable[[Any], list[str]]] = {}


_KEY_BY_ID: dict[int, tuple[Any, str]] = {}


def schema_key(schema: Any) -> str:
    """Content hash of a schema; key order does not change it. Cached per schema object, since
    the same dict is validated for every row of a step (the object is kept alive with its key)."""
    cached = _KEY_BY_ID.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    canonical = json.dumps(schema, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    key = hashlib.sha256(canonical.encode()).hexdigest()
    if len(_KEY_BY_ID) < 10_000:
        _KEY_BY_ID[id(schema)] = (schema, key)
    return key


def compile_schema(schema: dict[str, Any]) -> Validator:
    """The jsonschema validator for `schema`, built once per distinct schema."""
    key = schema_key(schema)
    if key not in _COMPILED:
        built = Draft202012Validator(copy.deepcopy(schema), format_checker=_FORMATS)
        _COMPILED.setdefault(key, built)
    return _COMPILED[key]


def validator_for(schema: dict[str, Any]) -> Callable[[Any], list[str]]:
    """A per-row check: readable errors ("$.tags[0]: 'x' is too long"), empty when valid."""
    key = schema_key(schema)
    check = _CHECKS.get(key)
    if check is None:
        compiled = compile_schema(schema)

        def check(value: Any) -> list[str]:
            found = [(_value_path(e.absolute_path), e.message) for e in compiled.iter_errors(value)]
            return [f"{path}: {_short(message)}" for path, message in sorted(found)]

        check = _CHECKS.setdefault(key, check)
    return check


def _value_path(parts: Any) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


_FENCE = re.compile(r"\A```(?:json)?\s*(.*?)\s*```\Z", re.S | re.I)


def parse_structured(text: str, schema: dict[str, Any]) -> tuple[Any, list[str]]:
    """Parse a model's JSON answer and validate it: (value, errors), errors empty when valid.

    A ```json fence is stripped. A null for an optional property that does not allow null reads
    as "absent": strict providers (OpenAI) must send every key, so optional ones come back null.
    """
    body = text.strip()
    fenced = _FENCE.match(body)
    body = fenced.group(1) if fenced else body
    if not body:
        return None, ["not valid JSON: the answer is empty"]
    try:
        value = json.loads(body, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        return None, [f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"]
    except ValueError as exc:
        return None, [f"not valid JSON: {exc}"]
    value = _drop_optional_nulls(value, schema, compile_schema(schema), 0)
    return value, validator_for(schema)(value)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def _drop_optional_nulls(value: Any, node: Any, compiled: Validator, depth: int) -> Any:
    node = _deref(compiled.schema, node)
    if depth > 32 or not isinstance(node, dict):
        return value
    if isinstance(value, list) and "items" in node:
        return [_drop_optional_nulls(v, node["items"], compiled, depth + 1) for v in value]
    if not isinstance(value, dict):
        return value
    props, required = node.get("properties") or {}, set(node.get("required") or ())
    out = {}
    for key, item in value.items():
        sub = props.get(key)
        optional_null = sub is not None and item is None and key not in required
        if optional_null and not compiled.evolve(schema=sub).is_valid(None):
            continue
        out[key] = item if sub is None else _drop_optional_nulls(item, sub, compiled, depth + 1)
    return out


# --- output columns and size -----------------------------------------------------------------


def flatten_fields(schema: dict[str, Any]) -> list[tuple[str, str]]:
    """Output columns of a structured step: (name, JSON type) per top-level property, in order.

    Nested objects and arrays stay one column (written as JSON text); "any" marks mixed types.
    """
    props = schema.get("properties") or {}
    return [(name, _json_type(schema, sub)) for name, sub in props.items()]


def _json_type(root: dict[str, Any], node: Any) -> str:
    node = _deref(root, node)
    if not isinstance(node, dict):
        return "any"
    if "const" in node or "enum" in node:
        kinds = {_type_of(v) for v in node.get("enum", [node.get("const")])}
    elif "type" in node:
        kinds = set(node["type"]) if isinstance(node["type"], list) else {node["type"]}
    else:
        branches = node.get("anyOf") or node.get("oneOf") or []
        kinds = {_json_type(root, b) for b in branches}
    kinds = kinds - {"null"} or kinds
    if kinds == {"integer", "number"}:
        return "number"
    return kinds.pop() if len(kinds) == 1 else "any"


def _type_of(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return "null" if value is None else "boolean"
    kinds = {int: "integer", float: "number", str: "string", list: "array", dict: "object"}
    return kinds.get(type(value), "any")


def _names(names: Any) -> str:
    return ", ".join(f"`{n}`" for n in names)
