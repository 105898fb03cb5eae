"""Tool steps: the answer is a call of one of the step's tools, validated against its parameters.

A step with `tools:` sends function definitions (name, description, JSON-schema parameters) and
stores the model's call as its answer: `{"tool", "arguments", "calls", "text"}`. `tool` and
`arguments` are the first call's (what a later step or a check reads: `extract.arguments.city`);
`calls` lists every call, for a model that makes several; `text` is a plain answer, which only
`tool_choice: auto` accepts (then `tool` and `arguments` are null). `output_schema` describes that
record as a JSON schema, so outputs, SQL steps, templates, checks and the report read it like any
structured step's answer.

`judge_calls` checks one answer: a text answer where a call is required, a call of a tool the step
does not declare or does not allow, and arguments that break the tool's parameter schema are
violations (the row is asked again with them as feedback, like any invalid answer).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from batchor.schema.answer_length import expected_answer_tokens
from batchor.schema.core import validator_for

# What every provider accepts as a function name (OpenAI and Anthropic: [a-zA-Z0-9_-]{1,64};
# Gemini also wants a letter or an underscore first).
TOOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
CHOICES = ("required", "auto")  # or the name of one tool: that tool must be called
NO_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class Tool:
    """A function the model may call, as sent: its name, what it does, its arguments' JSON schema."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: dict(NO_PARAMETERS))


class Call(Protocol):
    """A call as a provider adapter reads it (`providers.base.ToolCall`)."""

    @property
    def name(self) -> str: ...

    @property
    def arguments(self) -> Any: ...


def output_schema(tools: Sequence[Tool], choice: str) -> dict[str, Any]:
    """The stored answer of a tool step as a JSON schema (what later steps and outputs read)."""
    names = [t.name for t in tools]
    one = [t for t in tools if t.name == choice] or list(tools)
    arguments: dict[str, Any] = dict(one[0].parameters) if len(one) == 1 else {"type": "object"}
    optional = choice == "auto"
    call = {
        "type": "object",
        "properties": {"tool": {"type": "string", "enum": names}, "arguments": {"type": "object"}},
        "required": ["tool", "arguments"],
    }
    return {
        "type": "object",
        "properties": {
            "tool": {"type": ["string", "null"], "enum": [*names, None]} if optional else {"enum": names},
            "arguments": {**arguments, "type": ["object", "null"]} if optional else arguments,
            "calls": {"type": "array", "items": call},
            "text": {"type": ["string", "null"]},
        },
        "required": ["tool", "arguments", "calls", "text"],
    }


CALL_TOKENS = 10  # a call's own output tokens besides its arguments: its name and the call's framing


def expected_call_tokens(tools: Sequence[Tool]) -> int:
    """Output tokens of one call: its arguments (the largest tool's, by their schema) and its framing."""
    return max(expected_answer_tokens(t.parameters) for t in tools) + CALL_TOKENS


def judge_calls(
    tools: Sequence[Tool], choice: str, calls: Sequence[Call], text: str
) -> tuple[dict[str, Any] | None, list[str]]:
    """The answer as stored and its violations (empty when it is accepted)."""
    if not calls:
        if choice == "auto" and text.strip():
            return {"tool": None, "arguments": None, "calls": [], "text": text}, []
        wanted = f"the tool `{choice}`" if choice not in CHOICES else "one of the tools"
        named = ", ".join(f"`{t.name}`" for t in tools)
        return None, [f"{NOT_A_CALL}: call {wanted} ({named}) with its arguments"]
    by_name = {t.name: t for t in tools}
    violations: list[str] = []
    stored = []
    for n, call in enumerate(calls):
        where = f"call {n + 1} (`{call.name}`)" if len(calls) > 1 else f"the call of `{call.name}`"
        violations += _call_violations(by_name, choice, call, where)
        stored.append({"tool": call.name, "arguments": call.arguments})
    if violations:
        return None, violations
    first = stored[0]
    return {"tool": first["tool"], "arguments": first["arguments"], "calls": stored, "text": None}, []


def _call_violations(by_name: dict[str, Tool], choice: str, call: Call, where: str) -> list[str]:
    tool = by_name.get(call.name)
    if tool is None:
        return [f"{where}: there is no such tool (the tools are {', '.join(f'`{n}`' for n in by_name)})"]
    if choice not in CHOICES and call.name != choice:
        return [f"{where}: call `{choice}`, the tool this step asks for"]
    if not isinstance(call.arguments, dict):
        shown = json.dumps(call.arguments, ensure_ascii=False, default=str)[:120]
        return [f"{where}: the arguments must be a JSON object, got {shown}"]
    return [f"{where}: {_argument(v)}" for v in validator_for(tool.parameters)(call.arguments)]


def _argument(violation: str) -> str:
    """`$.city: 'x' is too short` -> `argument `city`: 'x' is too short`; `$: 'city' is a required
    property` -> `argument `city` is missing`."""
    path, sep, rule = violation.partition(": ")
    field = path[1:].lstrip(".") if sep and path.startswith("$") else ""
    missing = _MISSING.match(rule)
    if missing:
        return f"argument `{'.'.join(p for p in (field, missing.group(1)) if p)}` is missing"
    return f"argument `{field}`: {rule}" if field else f"arguments: {rule if sep else violation}"


_MISSING = re.compile(r"^'([^']*)' is a required property$")
NOT_A_CALL = "the answer is text, not a tool call"
CALL_CLOSING = "Call the tool again, with arguments that match its parameters, and nothing else."


def is_call_violation(violation: str) -> bool:
    """Whether a rejection comes from `judge_calls` (its re-ask asks for a call, not for JSON)."""
    return violation.startswith(("the call of `", "call ", NOT_A_CALL))


def rejected_text(calls: Sequence[Call], text: str) -> str:
    """What the model answered, as the assistant turn of a re-ask: its calls as JSON, else its text."""
    if not calls:
        return text
    return json.dumps([{"tool": c.name, "arguments": c.arguments} for c in calls], ensure_ascii=False, default=str)
