"""`tools:` steps on every provider, realtime and batch, through the real SDKs against the fake:
the tools go out in each provider's own shape (OpenAI `tools`/`tool_choice`, Anthropic `tools` with
`input_schema` and `tool_choice`, Gemini `functionDeclarations` and `toolConfig`), the call is the
answer (tool name and arguments, validated against the tool's parameters), arguments that break
the schema and a text answer where a call is required are `invalid_output`, asked again with
feedback, and a later step reads the call's arguments."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.csv as pacsv
import pytest
import yaml
from conftest import make_spec

from batchor import api

PROVIDERS = [("openai", "gpt-4.1-mini"), ("anthropic", "claude-haiku-4-5"), ("gemini", "gemini-2.5-flash")]
BATCH = {"mode": "batch", "batch_poll_s": 0.01, "batch_poll_max_s": 0.05}
CASES = [(*p, mode) for p in PROVIDERS for mode in ("realtime", "batch")]
WEATHER = {
    "name": "lookup_weather",
    "description": "Look up the current weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"],
    },
}
TIME = {
    "name": "local_time",
    "description": "The local time in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def query(workdir: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(workdir / ".batchor" / "state.duckdb"), read_only=True) as db:
        return db.execute(sql).fetchall()


def tool_spec(workdir: Path, provider: str, model: str, mode: str = "realtime", rows: int = 3, **step: Any) -> Path:
    limits = {"max_attempts": 2, **(BATCH if mode == "batch" else {})}
    ask = {"prompt": "Weather for: {{ row.text }}", "tools": [WEATHER], **step}
    return make_spec(workdir, rows=rows, schema=None, provider=provider, model=model, limits=limits, steps={"ask": ask})


def outputs(workdir: Path) -> list[dict[str, Any]]:
    return [json.loads(o) for (o,) in query(workdir, "SELECT output FROM results WHERE status = 'succeeded'")]


def sent_tools(provider: str, body: dict[str, Any]) -> tuple[Any, Any]:
    """(parameters schema of the first tool, tool choice) as the provider's own wire shape holds them."""
    if provider == "openai":
        return body["tools"][0]["function"]["parameters"], body["tool_choice"]
    if provider == "anthropic":
        return body["tools"][0]["input_schema"], body["tool_choice"]
    declaration = body["tools"][0]["functionDeclarations"][0]
    # the SDK writes the declaration's own fields as its types name them (the API reads either spelling)
    parameters = declaration.get("parametersJsonSchema", declaration.get("parameters_json_schema"))
    return parameters, body["toolConfig"]["functionCallingConfig"]


REQUIRED = {"openai": "required", "anthropic": {"type": "any"}, "gemini": {"mode": "ANY"}}


@pytest.mark.parametrize("provider,model,mode", CASES)
def test_the_call_is_the_answer_validated_and_stored(workdir, fake, provider, model, mode):
    outcome = api.apply(tool_spec(workdir, provider, model, mode), handle_signals=False)
    assert (outcome.succeeded, outcome.failed) == (3, 0)
    for answer in outputs(workdir):
        assert answer["tool"] == "lookup_weather" and answer["text"] is None
        assert isinstance(answer["arguments"]["city"], str) and answer["arguments"]["unit"] in ("celsius", "fahrenheit")
        assert answer["calls"] == [{"tool": "lookup_weather", "arguments": answer["arguments"]}]
    assert query(workdir, "SELECT count(*) FROM attempts WHERE outcome = 'ok' AND cost_usd > 0") == [(3,)]
    if mode == "realtime":  # the bodies as sent, in the provider's own shape
        parameters, choice = sent_tools(provider, fake.stats()["bodies"][0])
        assert parameters == WEATHER["parameters"] and choice == REQUIRED[provider]


@pytest.mark.parametrize("provider,model", PROVIDERS)
def test_arguments_that_break_the_schema_are_asked_again_with_feedback(workdir, fake, provider, model):
    fake.configure(scripted_answers=[{"unit": "kelvin"}, {"city": "Paris", "unit": "celsius"}])
    outcome = api.apply(tool_spec(workdir, provider, model, rows=1), handle_signals=False)
    assert (outcome.succeeded, outcome.failed) == (1, 0)
    assert outputs(workdir)[0]["arguments"] == {"city": "Paris", "unit": "celsius"}
    ((error,),) = query(workdir, "SELECT error FROM attempts WHERE outcome = 'invalid_output'")
    assert "lookup_weather" in error and "city" in error
    (reask,) = fake.stats()["reasks"]
    assert "kelvin" in reask["rejected"] and "argument `city` is missing" in reask["feedback"]
    assert "argument `unit`: 'kelvin' is not one of" in reask["feedback"] and "Call the tool again" in reask["feedback"]


@pytest.mark.parametrize("provider,model,mode", CASES)
def test_a_text_answer_where_a_call_is_required_is_not_a_success(workdir, fake, provider, model, mode):
    fake.configure(fail_matching={"review number 1": "text"})
    outcome = api.apply(tool_spec(workdir, provider, model, mode), handle_signals=False)
    assert (outcome.succeeded, outcome.failed) == (2, 1)
    ((code, error),) = query(workdir, "SELECT error_code, error FROM results WHERE status = 'failed'")
    assert code == "invalid_output" and "not a tool call" in error
    assert query(workdir, "SELECT count(*) FROM attempts WHERE outcome = 'invalid_output' AND cost_usd > 0") == [(2,)]


@pytest.mark.parametrize("provider,model", PROVIDERS)
def test_tool_choice_auto_accepts_a_text_answer(workdir, fake, provider, model):
    fake.configure(fail_matching={"review number 1": "text"})
    outcome = api.apply(tool_spec(workdir, provider, model, tool_choice="auto"), handle_signals=False)
    assert (outcome.succeeded, outcome.failed) == (3, 0)
    answers = sorted(outputs(workdir), key=lambda a: a["tool"] or "")
    assert answers[0]["tool"] is None and answers[0]["calls"] == [] and "answer in words" in answers[0]["text"]
    assert [a["tool"] for a in answers[1:]] == ["lookup_weather", "lookup_weather"]
    _, choice = sent_tools(provider, fake.stats()["bodies"][0])
    assert choice == {"openai": "auto", "anthropic": {"type": "auto"}, "gemini": {"mode": "AUTO"}}[provider]


NAMED = {
    "openai": {"type": "function", "function": {"name": "local_time"}},
    "anthropic": {"type": "tool", "name": "local_time"},
    "gemini": {"mode": "ANY", "allowedFunctionNames": ["local_time"]},
}


@pytest.mark.parametrize("provider,model", PROVIDERS)
def test_tool_choice_naming_a_tool_forces_that_tool(workdir, fake, provider, model):
    spec = tool_spec(workdir, provider, model, rows=2, tools=[WEATHER, TIME], tool_choice="local_time")
    outcome = api.apply(spec, handle_signals=False)
    assert (outcome.succeeded, outcome.failed) == (2, 0)
    assert {a["tool"] for a in outputs(workdir)} == {"local_time"}
    body = fake.stats()["bodies"][0]
    assert (
        _choice(provider, body) == NAMED[provider]
        and len(body["tools"][0].get("functionDeclarations", body["tools"])) == 2
    )


def _choice(provider: str, body: dict[str, Any]) -> Any:
    return body["toolConfig"]["functionCallingConfig"] if provider == "gemini" else body["tool_choice"]


def test_a_call_of_another_tool_than_the_named_one_is_invalid(workdir, fake):
    fake.configure(fail_matching={"review number 0": "tool_call"})  # calls lookup_weather, not local_time
    spec = tool_spec(workdir, "openai", "gpt-4.1-mini", rows=1, tools=[WEATHER, TIME], tool_choice="local_time")
    outcome = api.apply(spec, handle_signals=False)
    assert (outcome.succeeded, outcome.failed) == (0, 1)
    ((code, error),) = query(workdir, "SELECT error_code, error FROM results")
    assert code == "invalid_output" and "call `local_time`" in error


def test_a_later_step_and_the_output_file_read_the_call(workdir, fake):
    spec = tool_spec(workdir, "anthropic", "claude-haiku-4-5", rows=2)
    data = yaml.safe_load(spec.read_text())
    data["steps"]["report"] = {"prompt": "Forecast for {{ ask.arguments.city }} via {{ ask.tool }}"}
    spec.write_text(yaml.safe_dump(data))
    outcome = api.apply(spec, handle_signals=False)
    assert (outcome.succeeded, outcome.failed) == (4, 0)  # two rows, two steps
    table = pacsv.read_csv(workdir / "out" / "results.csv").to_pylist()
    assert {"ask.tool", "ask.arguments", "ask.calls", "ask.text", "report"} <= set(table[0])
    for row in table:
        city = json.loads(row["ask.arguments"])["city"]
        assert row["ask.tool"] == "lookup_weather" and city in row["report"] and "lookup_weather" in row["report"]
