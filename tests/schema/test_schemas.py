"""Output schemas: checking, per-row validation, parsing, provider adaptation, samples, columns."""

from __future__ import annotations

import copy
import json
import re

import pytest
from jsonschema import Draft202012Validator

from batchor.errors import ProviderSchemaError, SchemaError
from batchor.providers.schema_adapt import AdaptedSchema, adapt_schema
from batchor.schema.answer_length import TEXT_ANSWER_TOKENS, expected_answer_tokens
from batchor.schema.core import (
    check_schema,
    flatten_fields,
    parse_structured,
    validator_for,
)
from batchor.schema.sample_values import sample_value

WHERE = "steps.classify.output.schema"
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"


def obj(properties: dict, required: list[str] | None = None, **extra) -> dict:
    return {"type": "object", "properties": properties, "required": required or [], **extra}


TAG = obj({"name": {"type": "string"}, "weight": {"type": "number"}}, ["name"])
SCHEMAS = {
    "flat": obj({"answer": {"type": "string"}}, ["answer"]),
    "enum": obj({"label": {"enum": ["pos", "neg", "neutral"]}, "ok": {"type": "boolean"}}),
    "bounds": obj(
        {
            "score": {"type": "integer", "minimum": 1, "maximum": 5},
            "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
            "step": {"type": "number", "multipleOf": 0.25, "minimum": 1, "maximum": 3},
            "name": {"type": "string", "minLength": 3, "maxLength": 8},
        },
        ["score", "ratio", "step", "name"],
    ),
    "nested": obj(
        {"person": obj({"name": {"type": "string"}, "age": {"type": "integer"}}, ["name", "age"])}, ["person"]
    ),  # fmt: skip
    "array_of_objects": obj({"tags": {"type": "array", "items": TAG, "minItems": 2, "maxItems": 4}}, ["tags"]),
    "nullable": obj(
        {"note": {"type": ["string", "null"]}, "level": {"enum": ["low", "high", None]}},
        ["note", "level"],
    ),
    "defs_ref": {
        **obj({"tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}}}, ["tags"]),
        "$defs": {"Tag": TAG},
    },
    "definitions_ref": {
        **obj({"main": {"$ref": "#/definitions/Tag"}}, ["main"]),
        "definitions": {"Tag": TAG},
    },
    "any_of": obj(
        {
            "value": {"anyOf": [{"type": "integer", "minimum": 10}, {"type": "string"}]},
            "pick": {"oneOf": [{"type": "string", "maxLength": 2}, {"type": "integer"}]},
        },
        ["value", "pick"],
    ),  # fmt: skip
    "formats": obj(
        {f: {"type": "string", "format": f} for f in ("date", "date-time", "email", "uri", "uuid")},
        ["date", "date-time", "email", "uri", "uuid"],
    ),
    "pattern_const": obj(
        {"code": {"type": "string", "pattern": "^[A-Z]{3}-\\d{4}$"}, "kind": {"const": "item"}},
        ["code", "kind"],
    ),
    "unique_closed": obj(
        {"colors": {"type": "array", "items": {"enum": ["r", "g", "b"]}, "uniqueItems": True, "minItems": 3}},
        ["colors"],
        additionalProperties=False,
    ),  # fmt: skip
    "all_of": {**obj({"a": {"type": "string"}}), "allOf": [{"required": ["a"]}]},
    "recursive": {
        **obj({"root": {"$ref": "#/$defs/Node"}}, ["root"]),
        "$defs": {
            "Node": obj(
                {"label": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
                ["label", "children"],
            )
        },
    },  # fmt: skip
}
PROVIDERS = ["openai", "groq", "anthropic", "gemini", "mock", "somethingelse"]


# --- check_schema ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_check_schema_accepts_valid_schemas(name):
    check_schema(SCHEMAS[name], where=WHERE)


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (obj({"a": {"type": "strng"}}), f"{WHERE}.properties.a.type: not a valid JSON Schema"),
        (obj({"a": {"type": "string", "minLength": -1}}), "properties.a.minLength"),
        ({"type": "array", "items": {"type": "string"}}, "the schema root must be `type: object`"),
        ({"properties": {}}, "has no `type`"),
        (obj({"a": {"$ref": "#/$defs/Missing"}}), "$ref cannot be resolved"),
        (obj({"a": {"$ref": "https://example.com/s.json"}}), "not a local reference"),
        (obj({"a": {"type": "string", "maxlength": 3}}), "unknown keyword `maxlength`"),
        (obj({"a": {"type": "string", "nullable": True}}), "`nullable` is not a JSON Schema"),
        (obj({"a": {"type": "string"}}, ["b"], additionalProperties=False), "lists `b`"),
        ([1, 2], "must be a mapping"),
    ],
)
def test_check_schema_rejects_with_location(schema, expected):
    with pytest.raises(SchemaError) as caught:
        check_schema(schema, where=WHERE)
    message = str(caught.value)
    assert message.startswith(WHERE) and expected in message
    assert caught.value.hint  # every rejection says how to fix it


def test_check_schema_names_the_fix_for_a_typo():
    with pytest.raises(SchemaError) as caught:
        check_schema(obj({"a": {"type": "string"}}, propeties={}), where=WHERE)
    assert "did you mean `properties`" in str(caught.value)
    # unknown keys that are not near-misses of a constraint stay allowed (JSON Schema ignores them)
    check_schema(obj({"a": {"type": "string", "example": "x", "x-unit": "cm"}}), where=WHERE)


# --- validator_for and parse_structured ------------------------------------------------------


def test_validator_is_cached_per_canonical_schema():
    reordered = json.loads(json.dumps(SCHEMAS["bounds"], sort_keys=True))
    assert validator_for(SCHEMAS["bounds"]) is validator_for(reordered)
    assert validator_for(SCHEMAS["bounds"]) is not validator_for(SCHEMAS["flat"])


def test_validator_reports_paths_and_messages():
    check = validator_for(SCHEMAS["array_of_objects"])
    assert check({"tags": [{"name": "a"}, {"name": "b", "weight": 2}]}) == []
    errors = check({"tags": [{"name": 3}], "extra": 1})
    assert "$.tags: [{'name': 3}] is too short" in errors
    assert "$.tags[0].name: 3 is not of type 'string'" in errors


def test_validator_checks_formats():
    check = validator_for(SCHEMAS["formats"])
    good = {"date": "2024-02-29", "date-time": "2024-02-29T10:00:00Z", "email": "a@b.co",
            "uri": "https://x.y", "uuid": "12345678-1234-5678-1234-567812345678"}  # fmt: skip
    assert check(good) == []
    bad = {**good, "date": "2024-02-30", "date-time": "yesterday", "email": "nobody"}
    assert [e.split(":")[0] for e in check(bad)] == ["$.date", "$.date-time", "$.email"]


@pytest.mark.parametrize(
    "text",
    ['{"answer": "yes"}', '  \n{"answer": "yes"}\n ', '```json\n{"answer": "yes"}\n```',
     '```\n{"answer": "yes"}\n```', ' ```JSON {"answer": "yes"}```'],
)  # fmt: skip
def test_parse_structured_accepts_fences_and_whitespace(text):
    assert parse_structured(text, SCHEMAS["flat"]) == ({"answer": "yes"}, [])


@pytest.mark.parametrize(
    ("text", "expected"),
    [("not json", "not valid JSON: Expecting value (line 1, column 1)"),
     ("", "not valid JSON: the answer is empty"),
     ('{"answer": NaN}', "not valid JSON: NaN is not allowed")],
)  # fmt: skip
def test_parse_structured_reports_invalid_json(text, expected):
    assert parse_structured(text, SCHEMAS["flat"]) == (None, [expected])


def test_parse_structured_returns_schema_errors():
    value, errors = parse_structured('{"answer": 3}', SCHEMAS["flat"])
    assert value == {"answer": 3} and errors == ["$.answer: 3 is not of type 'string'"]


def test_null_for_optional_field_reads_as_absent():
    # What OpenAI strict mode sends for optional fields: every key, null when unused.
    schema = obj({"a": {"type": "string"}, "b": {"type": "integer"},
                  "c": {"type": ["string", "null"]}, "nested": obj({"x": {"type": "string"}})},
                 ["a"])  # fmt: skip
    text = '{"a": null, "b": null, "c": null, "nested": {"x": null}}'
    value, errors = parse_structured(text, schema)
    assert value == {"a": None, "c": None, "nested": {}}
    assert errors == ["$.a: None is not of type 'string'"]  # required stays required


# --- adapt_schema ----------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_adapted_schema_is_valid_and_input_untouched(name, provider):
    original = copy.deepcopy(SCHEMAS[name])
    adapted = adapt_schema(SCHEMAS[name], provider)
    assert isinstance(adapted, AdaptedSchema)
    Draft202012Validator.check_schema(adapted.schema)
    check_schema(adapted.schema, where="adapted")
    assert SCHEMAS[name] == original
    assert adapted.schema is not SCHEMAS[name]


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_notes_cover_whatever_the_provider_was_not_told(name, provider):
    """An answer valid for the adapted schema fails locally only where a note said it could."""
    adapted = adapt_schema(SCHEMAS[name], provider)
    noted = {"$"} if any(n.startswith("the root object") for n in adapted.notes) else set()
    for label in re.findall(r"^`([^`]+)`:", "\n".join(adapted.notes), re.M):
        noted |= set(re.split(r"[.\[\]]+", label))
    for seed in ("row-1", "row-2", "row-3"):
        answer = sample_value(adapted.schema, seed)
        for error in parse_structured(json.dumps(answer), SCHEMAS[name])[1]:
            field = re.sub(r"\[\d+\]", "", error.split(":")[0]).rsplit(".", 1)[-1]
            assert field in noted, error


def test_openai_makes_optional_fields_required_and_nullable():
    schema = obj({"a": {"type": "string"}, "b": {"type": "integer", "enum": [1, 2]},
                  "c": {"$ref": "#/$defs/C"}, "d": {"anyOf": [{"type": "string"}]}},
                 ["a"], **{"$defs": {"C": obj({"x": {"type": "string"}}, ["x"])}})  # fmt: skip
    adapted = adapt_schema(schema, "openai")
    props = adapted.schema["properties"]
    assert adapted.strict is True
    assert adapted.schema["required"] == ["a", "b", "c", "d"]
    assert adapted.schema["additionalProperties"] is False
    assert adapted.schema["$defs"]["C"]["additionalProperties"] is False
    assert props["a"] == {"type": "string"}
    assert props["b"] == {"type": ["integer", "null"], "enum": [1, 2, None]}
    assert props["c"] == {"anyOf": [{"$ref": "#/$defs/C"}, {"type": "null"}]}
    assert props["d"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert any("optional `b`, `c`, `d`" in note for note in adapted.notes)


def test_openai_leaves_out_length_keywords_with_a_note():
    adapted = adapt_schema(SCHEMAS["bounds"], "openai")
    assert adapted.strict is True
    assert adapted.schema["properties"]["name"] == {"type": "string"}
    assert adapted.schema["properties"]["score"]["maximum"] == 5  # supported: kept, no note
    assert adapted.notes == ("`name`: minLength 3, maxLength 8 not sent (unsupported in strict "
                             "mode); validated locally",)  # fmt: skip


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        (obj({"a": {"type": "string"}}, ["a"], additionalProperties=True), "allows extra keys"),
        (obj({"m": {"type": "object", "additionalProperties": {"type": "integer"}}}, ["m"]),
         "allows extra keys"),
        (obj({"m": {"type": "object"}}, ["m"]), "free-form object"),
        (obj({"m": {"type": "object", "patternProperties": {"^x": {"type": "string"}},
                    "additionalProperties": False}}, ["m"]),
         "`patternProperties` is not supported"),
        (obj({"a": {"type": "string"}}, ["a"], **{"if": {}, "then": {}}), "`if` is not supported"),
        (obj({"a": {}}, ["a"]), "`a`: accepts any value"),
        (obj({"a": True}, ["a"]), "`a`: accepts any value"),
        (obj({"a": {"type": "array", "items": True}}, ["a"]), "`a[]`: accepts any value"),
    ],
)  # fmt: skip
def test_openai_strict_impossible_sends_original(schema, reason):
    adapted = adapt_schema(schema, "openai")
    assert adapted.strict is False
    assert adapted.schema == schema
    assert any(reason in note for note in adapted.notes)
    assert "validates every answer locally" in adapted.notes[-1]


def test_openai_compatible_providers_get_a_caveat():
    assert adapt_schema(SCHEMAS["flat"], "openai").notes == ()
    notes = adapt_schema(SCHEMAS["flat"], "vllm").notes
    assert notes == ("vllm servers differ in how fully they honour strict mode; validated locally",)


def test_anthropic_moves_bounds_into_descriptions():
    schema = obj({"score": {"type": "integer", "minimum": 1, "maximum": 5, "description": "Stars"},
                  "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"},
                           "minItems": 2},
                  "when": {"type": "string", "format": "date"},
                  "odd": {"type": "string", "format": "iso-week"}},
                 ["score"])  # fmt: skip
    adapted = adapt_schema(schema, "anthropic")
    props = adapted.schema["properties"]
    assert adapted.strict is True
    assert props["score"] == {"type": "integer", "description": "Stars (minimum: 1, maximum: 5)"}
    assert props["tags"]["description"] == "(minItems: 2)"
    assert props["tags"]["items"] == {"type": "string", "description": '(pattern: "^[a-z]+$")'}
    assert props["when"] == {"type": "string", "format": "date"}
    assert props["odd"] == {"type": "string", "description": '(format: "iso-week")'}
    assert adapted.schema["additionalProperties"] is False
    assert adapted.schema["required"] == ["score"]  # optional fields stay optional
    assert sorted(note.split(":")[0] for note in adapted.notes) == [
        "`odd`", "`score`", "`tags[]`", "`tags`"
    ]  # fmt: skip
    assert "`score`: minimum 1, maximum 5 moved into the description" in "\n".join(adapted.notes)


def test_anthropic_rejects_recursion_and_open_maps():
    assert adapt_schema(SCHEMAS["recursive"], "anthropic").strict is False
    mapping = obj({"m": {"type": "object", "additionalProperties": {"type": "integer"}}}, ["m"])
    adapted = adapt_schema(mapping, "anthropic")
    assert adapted.strict is False and "free-form object" in adapted.notes[0]
    open_obj = obj({"a": {"type": "string"}}, ["a"], additionalProperties=True)
    adapted = adapt_schema(open_obj, "anthropic")
    assert adapted.strict is True and adapted.schema["additionalProperties"] is False
    assert "will only produce the listed ones" in adapted.notes[0]


def test_gemini_strips_unsupported_keywords_with_notes():
    schema = obj(
        {"code": {"type": "string", "pattern": "^A", "minLength": 2, "title": "Code"},
         "n": {"type": "integer", "minimum": 0, "exclusiveMaximum": 9},
         "mail": {"type": "string", "format": "email"},
         "level": {"type": ["string", "null"], "enum": ["low", None]},
         "flag": {"type": "boolean", "enum": [True]},
         "k": {"const": "fixed"}},
        ["code"], additionalProperties=False, **{"$schema": DRAFT_2020_12},
    )  # fmt: skip
    adapted = adapt_schema(schema, "gemini")
    props = adapted.schema["properties"]
    assert adapted.strict is True
    assert "$schema" not in adapted.schema
    assert adapted.schema["additionalProperties"] is False  # documented as supported: kept
    assert props["code"] == {"type": "string", "title": "Code"}
    assert props["n"] == {"type": "integer", "minimum": 0}
    assert props["mail"] == {"type": "string"}
    assert props["level"] == {"anyOf": [{"type": "string", "enum": ["low"]}, {"type": "null"}]}
    assert props["flag"] == {"type": "boolean"}
    assert props["k"] == {"enum": ["fixed"]}
    joined = "\n".join(adapted.notes)
    for expected in ('`code`: pattern "^A", minLength 2 removed', "`n`: exclusiveMaximum 9",
                     '`mail`: format "email"', "`flag`: enum [true] removed"):  # fmt: skip
        assert expected in joined
    assert "`level`" not in joined and "`k`" not in joined  # rewritten, nothing lost


def test_gemini_moves_definitions_to_defs():
    adapted = adapt_schema(SCHEMAS["definitions_ref"], "gemini")
    assert "definitions" not in adapted.schema
    assert adapted.schema["properties"]["main"] == {"$ref": "#/$defs/Tag"}
    assert adapted.schema["$defs"]["Tag"] == TAG


def test_mock_and_unknown_providers():
    mock = adapt_schema(SCHEMAS["bounds"], "mock")
    assert mock == AdaptedSchema(SCHEMAS["bounds"], True, ())
    unknown = adapt_schema(SCHEMAS["bounds"], "carrier-pigeon")
    assert unknown.strict is False and unknown.schema == SCHEMAS["bounds"]
    assert "nothing is enforced remotely" in unknown.notes[0]


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_adapt_requires_an_object_root(provider):
    with pytest.raises(ProviderSchemaError, match="need `type: object` at the schema root"):
        adapt_schema({"type": "string"}, provider)


# --- sample_value ----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", ["a", "b", "row-17", "x" * 40])
@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_sample_value_is_valid_against_the_original_schema(name, seed):
    value = sample_value(SCHEMAS[name], seed)
    assert validator_for(SCHEMAS[name])(value) == []


def test_sample_value_is_deterministic_and_varies_with_seed():
    schema = SCHEMAS["bounds"]
    assert sample_value(schema, "s1") == sample_value(schema, "s1")
    assert len({json.dumps(sample_value(schema, f"s{i}")) for i in range(10)}) > 5


def test_sample_value_details():
    value = sample_value(SCHEMAS["pattern_const"], "seed")
    assert value["kind"] == "item" and len(value["code"]) == 8
    assert sorted(sample_value(SCHEMAS["unique_closed"], "z")["colors"]) == ["b", "g", "r"]
    assert sample_value(SCHEMAS["flat"], "q")["answer"].startswith("sample answer ")
    nullable = sample_value(SCHEMAS["nullable"], "n")  # null only when the type demands it
    assert nullable["note"] is not None and nullable["level"] in ("low", "high")
    assert sample_value(obj({"n": {"type": "null"}}, ["n"]), "n") == {"n": None}


def test_sample_value_array_lengths_default_to_one_to_three():
    schema = obj({"xs": {"type": "array", "items": {"type": "integer"}}}, ["xs"])
    lengths = {len(sample_value(schema, str(i))["xs"]) for i in range(30)}
    assert lengths == {1, 2, 3}


# --- flatten_fields and estimate_output_tokens -----------------------------------------------


def test_flatten_fields_lists_top_level_columns_in_order():
    schema = {
        **obj({
            "label": {"enum": ["a", "b"]},
            "score": {"type": "integer"},
            "ratio": {"type": ["number", "null"]},
            "ok": {"type": "boolean"},
            "person": obj({"name": {"type": "string"}}),
            "tags": {"type": "array", "items": {"type": "string"}},
            "ref": {"$ref": "#/$defs/T"},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "num": {"anyOf": [{"type": "integer"}, {"type": "number"}, {"type": "null"}]},
        }),
        "$defs": {"T": {"type": "string"}},
    }  # fmt: skip
    assert flatten_fields(schema) == [
        ("label", "string"), ("score", "integer"), ("ratio", "number"), ("ok", "boolean"),
        ("person", "object"), ("tags", "array"), ("ref", "string"), ("either", "any"),
        ("num", "number"),
    ]  # fmt: skip


def test_expected_answer_tokens():
    assert expected_answer_tokens(None) == TEXT_ANSWER_TOKENS
    small = expected_answer_tokens(obj({"ok": {"type": "boolean"}}))
    assert 0 < small < 10
    long_text = obj({"summary": {"type": "string", "maxLength": 2000}})
    assert 240 < expected_answer_tokens(long_text) < 270  # half the limit, ~4 characters a token
    listed = obj({"tags": {"type": "array", "items": TAG}})
    assert expected_answer_tokens(listed) > 3 * expected_answer_tokens(TAG)
    assert isinstance(expected_answer_tokens(SCHEMAS["recursive"]), int)
    # enums cost their values, a prose field more than a label, a bounded list the middle of its range
    labels = obj({"sentiment": {"type": "string", "enum": ["positive", "negative"]}})
    assert expected_answer_tokens(labels) == expected_answer_tokens(obj({"sentiment": {"const": "positive"}}))
    assert expected_answer_tokens(obj({"reason": {"type": "string"}})) > 3 * expected_answer_tokens(
        obj({"label": {"type": "string"}})
    )
    few = obj({"tags": {"type": "array", "items": TAG, "maxItems": 2}})
    many = obj({"tags": {"type": "array", "items": TAG, "minItems": 8, "maxItems": 10}})
    assert expected_answer_tokens(many) > 4 * expected_answer_tokens(few)
