"""Tool calls in answers, parsed from each provider's JSON: every call batchor did not ask for is
kept (name and arguments) for the judge to refuse; Anthropic's forced answer tool stays the text."""

from __future__ import annotations

import pytest

from batchor.engine.recorder import judge
from batchor.errors import UnexpectedToolCallError
from batchor.plan.model import StepPlan
from batchor.providers.anthropic import realtime as anthropic
from batchor.providers.base import Completion, ToolCall, answer_tool
from batchor.providers.gemini import realtime as gemini
from batchor.providers.openai import realtime as openai

CALL = ToolCall("lookup_weather", {"city": "Paris"})


def test_openai_chat_content_null_with_tool_calls():
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "lookup_weather", "arguments": '{"city": "Paris"}'}}
    ]}  # fmt: skip
    completion = openai.parse_result({"choices": [{"message": message, "finish_reason": "tool_calls"}]})
    assert (completion.text, completion.tool_calls) == ("", (CALL,))


def test_openai_responses_function_call_item():
    item = {"type": "function_call", "name": "lookup_weather", "arguments": '{"city": "Paris"}'}
    completion = openai.parse_result({"output": [item], "status": "completed"}, api="responses")
    assert completion.tool_calls == (CALL,)


def test_anthropic_tool_use_block():
    blocks = [{"type": "tool_use", "name": "lookup_weather", "input": {"city": "Paris"}}]
    assert anthropic.parse_result({"content": blocks}).tool_calls == (CALL,)


def test_the_forced_answer_tool_is_the_answer_any_other_call_is_refused():
    step = plan_step(schema={"type": "object"})
    forced = Completion(text='{"label": "positive"}', tool_calls=(ToolCall(answer_tool(step.name), {}),))
    assert judge(step, forced) == '{"label":"positive"}'
    with pytest.raises(UnexpectedToolCallError, match="lookup_weather"):
        judge(step, Completion(text="", tool_calls=(CALL,)))
    with pytest.raises(UnexpectedToolCallError):  # a text step sends no tool at all
        judge(plan_step(schema=None), forced)


def plan_step(schema: dict | None) -> StepPlan:
    return StepPlan(
        name="classify", provider="anthropic", model="m", params={}, schema=schema, prompt="p",
        max_tokens=10, expected_output_tokens=5, key_prefix="k",
    )  # fmt: skip


def test_gemini_function_call_part():
    parts = [{"functionCall": {"name": "lookup_weather", "args": {"city": "Paris"}}}]
    data = {"candidates": [{"content": {"parts": parts}, "finishReason": "STOP"}]}
    completion = gemini.parse_result(data)
    assert (completion.text, completion.tool_calls) == ("", (CALL,))
