"""Pure parts of the fake server: schema-valid answers, Gemini schemas, multipart bodies."""

from __future__ import annotations

import json

import jsonschema
import pytest

from .answers import malformed_text, schema_answer, violating_value
from .gemini_routes import from_openapi_schema
from .limits import Limiter
from .wire import parse_multipart

HARD = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["name", "kids"],
        },
        "colour": {"enum": ["red", "green", "blue", "cyan", "plum"]},
    },
    "type": "object",
    "properties": {
        "tree": {"$ref": "#/$defs/node"},
        "maybe": {"anyOf": [{"type": "integer", "minimum": 3, "maximum": 4}, {"type": "null"}]},
        "choice": {"oneOf": [{"type": "string", "maxLength": 2}, {"type": "integer"}]},
        "nullable": {"type": ["null", "number"], "exclusiveMinimum": -1.5, "exclusiveMaximum": -1},
        "even": {"type": "integer", "minimum": 10, "maximum": 20, "multipleOf": 4},
        "short": {"type": "string", "minLength": 2, "maxLength": 3},
        "long": {"type": "string", "minLength": 40},
        "when": {"type": "string", "format": "date-time"},
        "email": {"type": "string", "format": "email"},
        "id": {"type": "string", "format": "uuid"},
        "colours": {
            "type": "array",
            "items": {"$ref": "#/$defs/colour"},
            "minItems": 3,
            "maxItems": 4,
            "uniqueItems": True,
        },
        "many": {"type": "array", "items": {"type": "boolean"}, "minItems": 5, "maxItems": 6},
        "pair": {
            "type": "array",
            "prefixItems": [{"type": "integer"}, {"const": "x"}],
            "minItems": 2,
            "maxItems": 2,
        },
        "merged": {
            "allOf": [
                {"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"properties": {"b": {"type": "string"}}, "required": ["b"]},
            ]
        },
        "fixed": {"const": 42},
        "anything": {},
    },
    "required": ["tree", "maybe", "fixed"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("seed", [f"prompt {i}" for i in range(40)])
def test_schema_answers_are_valid(seed):
    value = schema_answer(HARD, seed)
    jsonschema.Draft202012Validator(HARD, format_checker=jsonschema.FormatChecker()).validate(value)
    assert set(value) == set(HARD["properties"])
    assert schema_answer(HARD, seed) == value


def test_answers_vary_with_the_prompt():
    labels = {schema_answer(HARD, f"p{i}")["colours"][0] for i in range(30)}
    assert len(labels) >= 3


@pytest.mark.parametrize("seed", [f"s{i}" for i in range(20)])
def test_malformed_answers_never_validate(seed):
    schema = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}
    with pytest.raises((json.JSONDecodeError, jsonschema.ValidationError)):
        jsonschema.validate(json.loads(malformed_text(schema, seed)), schema)
    broken = violating_value(schema, schema_answer(schema, seed))
    assert isinstance(broken, dict)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_gemini_openapi_schema_becomes_json_schema():
    openapi = {
        "type": "OBJECT",
        "properties": {
            "tags": {"type": "ARRAY", "items": {"type": "STRING"}, "minItems": "2"},
            "score": {"type": "INTEGER", "nullable": True},
        },
        "required": ["tags"],
        "property_ordering": ["tags", "score"],
    }
    schema = from_openapi_schema(openapi)
    assert schema["properties"]["tags"] == {
        "type": "array",
        "items": {"type": "string"},
        "minItems": 2,
    }
    assert schema["properties"]["score"]["type"] == ["integer", "null"]
    jsonschema.validate(schema_answer(schema, "x"), schema)


def test_limiter_refills_over_time():
    limiter = Limiter(rpm=120, tpm=None, burst_s=1.0)  # 2 per second, bucket of 2
    key = ("openai", "m")
    assert limiter.admit(key, 0, now=0.0).retry_after_s == 0
    assert limiter.admit(key, 0, now=0.0).retry_after_s == 0
    refused = limiter.admit(key, 0, now=0.0)
    assert refused.refused_by == "requests" and refused.retry_after_s == pytest.approx(0.5)
    assert limiter.admit(key, 0, now=0.5).retry_after_s == 0
    assert limiter.admit(("openai", "other-model"), 0, now=0.5).retry_after_s == 0


def test_parse_multipart():
    body = (
        b"--XyZ\r\n"
        b'Content-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
        b"--XyZ\r\n"
        b'Content-Disposition: form-data; name="file"; filename="in.jsonl"\r\n'
        b"Content-Type: application/jsonl\r\n\r\n"
        b'{"a": 1}\r\n{"a": 2}\r\n'
        b"--XyZ--\r\n"
    )
    parts = parse_multipart(body, 'multipart/form-data; boundary="XyZ"')
    assert parts["purpose"].data == b"batch"
    assert parts["file"].filename == "in.jsonl"
    assert parts["file"].content_type == "application/jsonl"
    assert parts["file"].data == b'{"a": 1}\r\n{"a": 2}'


def test_constraints_moved_into_descriptions_are_followed():
    # batchor's Anthropic adaptation writes unsupported keywords as "(key: value, ...)"
    schema = {
        "type": "object",
        "required": ["n", "tags"],
        "properties": {
            "n": {"type": "integer", "description": "Star rating (minimum: 1, maximum: 5)"},
            "tags": {
                "type": "array",
                "description": "(maxItems: 1)",
                "items": {"type": "string", "description": "(maxLength: 3)"},
            },
        },
    }
    strict = {
        "type": "object",
        "properties": {"n": {"minimum": 1, "maximum": 5}, "tags": {"maxItems": 1, "items": {"maxLength": 3}}},
    }
    for seed in range(20):
        jsonschema.validate(schema_answer(schema, str(seed)), strict)


def test_text_answers_can_have_realistic_log_normal_lengths():
    from statistics import median, stdev

    from .answers import text_answer

    counts = [len(text_answer(f"Summarise ticket {i}", [120, 0.6]).split()) for i in range(2000)]
    assert text_answer("same", [120, 0.6]) == text_answer("same", [120, 0.6])  # deterministic per prompt
    assert 105 <= median(counts) <= 135 and stdev(counts) > 50  # spread like real answers, not one length
    assert text_answer("Summarise ticket 1") == "echo: Summarise ticket 1"  # off by default


def test_text_answer_lengths_can_grow_with_the_prompts_and_stay_as_they_were_without():
    import math

    from .core import Call, build_answer

    def words(prompt: str, follow: list[float] | None) -> int:
        call = Call(provider="gemini", model="m", prompt=prompt, input_text=prompt)
        config = {"text_words": [120, 0.4], "text_words_follow": follow}
        return len(build_answer(call, words=config["text_words"], config=config).text.split())

    prompts = [" ".join(["word"] * (10 + i % 90)) + f" {i}" for i in range(600)]
    plain = [words(p, None) for p in prompts]
    assert plain == [words(p, [0.0, 50]) for p in prompts]  # beta 0: the answers of the default
    followed = [words(p, [1.0, 50]) for p in prompts]
    assert followed == [words(p, [1.0, 50]) for p in prompts]  # deterministic per prompt
    logs = [(math.log(len(p.split())), math.log(f)) for p, f in zip(prompts, followed)]
    mx, my = (sum(v[k] for v in logs) / len(logs) for k in (0, 1))
    slope = sum((x - mx) * (y - my) for x, y in logs) / sum((x - mx) ** 2 for x, _ in logs)
    assert 0.85 <= slope <= 1.15  # log length grows with log prompt words at beta 1
    ratios = [f / p for f, p in zip(followed, plain)]  # the same draw around a moved median
    assert all(
        abs(r - len(p.split()) / 50) <= 0.05 * len(p.split()) / 50 + 1 / q for r, p, q in zip(ratios, prompts, plain)
    )


REVIEW = json.loads((__import__("pathlib").Path(__file__).parents[2] / "schemas" / "review.schema.json").read_text())


def test_a_plausible_mistake_breaks_one_rule_and_keeps_the_answer_otherwise():
    from .answers import plausible_mistake

    kinds = set()
    for i in range(60):
        value = schema_answer(REVIEW, f"review {i}")
        wrong = plausible_mistake(REVIEW, value, f"review {i}")
        assert plausible_mistake(REVIEW, value, f"review {i}") == wrong  # deterministic per seed
        errors = list(jsonschema.Draft202012Validator(REVIEW).iter_errors(wrong))
        assert len(errors) == 1, errors
        changed = {k for k in value if wrong.get(k, object()) != value[k]}
        assert len(changed) == 1
        kinds.add(errors[0].validator)
    assert kinds == {"required", "maximum", "enum", "maxItems"}  # each kind the schema allows, by seed


def test_mistakes_are_drawn_for_their_share_of_requests_from_the_text_alone():
    from .answers import mistake_drawn

    drawn = [mistake_drawn(f"Review: text {i}", 0.2) for i in range(4000)]
    assert 0.18 <= sum(drawn) / len(drawn) <= 0.22
    assert drawn == [mistake_drawn(f"Review: text {i}", 0.2) for i in range(4000)]
    assert not any(mistake_drawn(f"Review: text {i}", 0.0) for i in range(200))


def test_models_get_labelled_answers_right_at_their_own_rate():
    from .core import Answer, Call
    from .models import graded

    schema = {"type": "object", "properties": {"sentiment": {"enum": ["positive", "negative"]}}}
    right = {}
    for model, accuracy in (("weak", 0.3), ("strong", 1.0)):
        config = {"model_accuracy": {model: accuracy}}
        calls = [Call("openai", model, "p", f"row {i} [truth: negative]", schema) for i in range(200)]
        answers = [graded(c, Answer('{"sentiment": "positive"}', None, 1, 1), config) for c in calls]
        right[model] = sum(json.loads(a.text)["sentiment"] == "negative" for a in answers) / 200
    assert right["strong"] == 1.0 and 0.2 < right["weak"] < 0.4
    unlisted = Call("openai", "other", "p", "row [truth: negative]", schema)
    assert graded(unlisted, Answer('{"sentiment": "positive"}', None, 1, 1), config).text == '{"sentiment": "positive"}'
