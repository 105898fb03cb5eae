"""A tool step's request in each provider's own shape (pure `to_body`, the body batch lines carry
too): OpenAI Chat `tools[].function` with `tool_choice` required/auto/`{"type": "function", ...}`,
Responses flat non-strict functions, Anthropic `input_schema` with `any`/`auto`/`tool`, Gemini
`function_declarations` with a calling mode ANY/AUTO and the allowed function."""

from __future__ import annotations

import json

import pytest

from batchor.providers.anthropic import realtime as anthropic
from batchor.providers.base import LLMRequest
from batchor.providers.gemini import realtime as gemini
from batchor.providers.openai import realtime as openai
from batchor.providers.openai.batch import encode_line
from batchor.schema.tools import Tool

ARGS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = (Tool("lookup_weather", "Weather in a city.", ARGS), Tool("local_time", "Time in a city.", ARGS))
MESSAGES = ({"role": "user", "content": "Paris?"},)
PARAMS = {"max_tokens": 50}  # one object for every request, as a step's requests share theirs


def request(choice: str) -> LLMRequest:
    return LLMRequest("k1", "m", MESSAGES, PARAMS, tools=TOOLS, tool_choice=choice)


@pytest.mark.parametrize(
    "choice,chat,responses",
    [
        ("required", "required", "required"),
        ("auto", "auto", "auto"),
        (
            "local_time",
            {"type": "function", "function": {"name": "local_time"}},
            {"type": "function", "name": "local_time"},
        ),
    ],
)
def test_openai_chat_and_responses(choice, chat, responses):
    body = openai.to_body(request(choice))
    assert body["tool_choice"] == chat and "response_format" not in body
    function = body["tools"][0]
    assert function == {"type": "function", "function": {"name": "lookup_weather", "description": "Weather in a city.",
                                                         "parameters": ARGS}}  # fmt: skip
    body = openai.to_body(request(choice), api="responses")
    assert body["tool_choice"] == responses and "text" not in body
    assert body["tools"][1] == {"type": "function", "name": "local_time", "description": "Time in a city.",
                                "parameters": ARGS, "strict": False}  # fmt: skip


@pytest.mark.parametrize(
    "choice,expected",
    [("required", {"type": "any"}), ("auto", {"type": "auto"}), ("local_time", {"type": "tool", "name": "local_time"})],
)
def test_anthropic(choice, expected):
    body = anthropic.to_body(request(choice))
    assert body["tool_choice"] == expected and "output_config" not in body
    assert body["tools"][0] == {"name": "lookup_weather", "description": "Weather in a city.", "input_schema": ARGS}


@pytest.mark.parametrize(
    "choice,expected",
    [
        ("required", {"mode": "ANY"}),
        ("auto", {"mode": "AUTO"}),
        ("local_time", {"mode": "ANY", "allowed_function_names": ["local_time"]}),
    ],
)
def test_gemini(choice, expected):
    config = gemini.to_body(request(choice))["config"]
    assert config["tool_config"] == {"function_calling_config": expected} and "response_json_schema" not in config
    (tool,) = config["tools"]
    assert [d["name"] for d in tool["function_declarations"]] == ["lookup_weather", "local_time"]
    assert tool["function_declarations"][0]["parameters_json_schema"] == ARGS


def test_openai_batch_lines_carry_the_tools_of_their_own_step():
    """The line template is cached per step: two steps that differ only in their tools differ."""
    first = json.loads(encode_line(request("required"), api="chat", strict=False))
    other = LLMRequest("k2", "m", MESSAGES, PARAMS, tools=TOOLS[1:], tool_choice="required")
    second = json.loads(encode_line(other, api="chat", strict=False))
    assert [t["function"]["name"] for t in first["body"]["tools"]] == ["lookup_weather", "local_time"]
    assert [t["function"]["name"] for t in second["body"]["tools"]] == ["local_time"]
