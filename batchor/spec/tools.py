"""A step's `tools:` read and checked: each tool's parameter schema loaded (inline or a file),
names every provider accepts, one tool per name, a `tool_choice` that names a declared tool.

Problems are `tool_invalid` (names, choice, tools beside an output schema), `tool_schema_missing`
(a parameters file that is not there or holds no JSON object) or `schema_invalid` (parameters that
are not a usable JSON schema), each at the spec's `file:line`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from batchor.errors import ToolSchemaMissingError, ToolSpecError
from batchor.schema.core import check_schema
from batchor.schema.tools import CHOICES, NO_PARAMETERS, TOOL_NAME, Tool
from batchor.spec.model import LLMStep, ReduceStep, SchemaOutput
from batchor.spec.schema_files import read_schema_file

Where = Callable[..., str]  # key path -> `file:line`


def resolve_tools(step: Any, name: str, base: Path, where: Where) -> list[Tool]:
    """The step's tools with their parameter schemas loaded ([] for none)."""
    tools = getattr(step, "tools", None)
    if isinstance(step, LLMStep) and not tools and "tool_choice" in step.model_fields_set:
        raise ToolSpecError(
            f"{where('steps', name, 'tool_choice')}: steps.{name}.tool_choice: the step declares no `tools`",
            hint="add the tools the model may call under `tools:`, or remove `tool_choice`",
        )
    if not isinstance(step, LLMStep) or not tools:
        return []
    _check_step(step, name, where)
    resolved, seen = [], set()
    for n, tool in enumerate(tools):
        at = ("steps", name, "tools", n)
        if not TOOL_NAME.match(tool.name):
            raise ToolSpecError(
                f"{where(*at, 'name')}: steps.{name}.tools[{n}].name: '{tool.name}' is not a name every provider "
                "accepts",
                hint="use letters, digits, `_` and `-` (up to 64), starting with a letter or `_`, e.g. lookup_weather",
            )
        if tool.name in seen:
            raise ToolSpecError(
                f"{where(*at, 'name')}: steps.{name}.tools: two tools are named '{tool.name}'",
                hint="give each tool its own name",
            )
        seen.add(tool.name)
        parameters = _parameters(tool.parameters, base, where(*at, "parameters"), f"steps.{name}.tools[{n}]")
        resolved.append(Tool(tool.name, tool.description, parameters))
    if step.tool_choice not in CHOICES and step.tool_choice not in seen:
        raise ToolSpecError(
            f"{where('steps', name, 'tool_choice')}: steps.{name}.tool_choice: '{step.tool_choice}' is neither "
            f"{' nor '.join(CHOICES)} nor one of the step's tools ({', '.join(sorted(seen))})",
            hint="write `required` (any tool), `auto` (a call or a text answer) or the name of one tool",
        )
    return resolved


def _check_step(step: LLMStep, name: str, where: Where) -> None:
    if isinstance(step.output, SchemaOutput):
        raise ToolSpecError(
            f"{where('steps', name, 'output')}: steps.{name}: a step with `tools` answers with a call: it "
            "takes no `output: {schema: ...}`",
            hint="remove `output:` (the call's arguments are validated against the tool's `parameters`), "
            "or remove `tools:`",
        )
    if isinstance(step, ReduceStep):
        raise ToolSpecError(
            f"{where('steps', name, 'tools')}: steps.{name}: a reduce step cannot answer with tool calls",
            hint="call the tools in a row step after the reduce, or give the reduce an output schema",
        )


def _parameters(value: dict[str, Any] | str | None, base: Path, loc: str, key: str) -> dict[str, Any]:
    if value is None:
        return dict(NO_PARAMETERS)
    if isinstance(value, str):
        value = read_schema_file(value, base, f"{loc}: {key}.parameters", ToolSchemaMissingError)
    check_schema(value, where=f"{loc}: {key}.parameters")
    return value
