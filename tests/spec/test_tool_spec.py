"""`tools:` in a spec: checked at `validate` with stable codes at the spec's file:line (a name no
provider accepts, two tools of one name, a `tool_choice` naming no tool, tools beside an output
schema, a parameters file that is not there, parameters that are no JSON schema); a valid tool
step is planned with its calls as its output and the definitions' tokens in its input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import make_spec

from batchor import api
from batchor.errors import BatchorError, problems_of

WEATHER = {
    "name": "lookup_weather",
    "description": "Look up the current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def tool_spec(workdir: Path, **step: Any) -> Path:
    ask = {"prompt": "Weather for: {{ row.text }}", "tools": [WEATHER], **step}
    return make_spec(workdir, rows=3, schema=None, steps={"ask": ask})


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def problem(spec: Path) -> BatchorError:
    with pytest.raises(BatchorError) as info:
        api.validate(spec)
    (found,) = problems_of(info.value)
    return found


@pytest.mark.parametrize("name", ["has space", "1st_tool", "a" * 65, "dots.in.name"])
def test_a_name_no_provider_accepts_is_tool_invalid(workdir, name):
    spec = tool_spec(workdir, tools=[{**WEATHER, "name": name}])
    found = problem(spec)
    assert found.code == "tool_invalid" and f"'{name}'" in found.message
    assert found.message.startswith(f"{spec}:") and "tools[0].name" in found.message


def test_two_tools_of_one_name_are_tool_invalid(workdir):
    found = problem(tool_spec(workdir, tools=[WEATHER, WEATHER]))
    assert found.code == "tool_invalid" and "two tools are named 'lookup_weather'" in found.message


def test_a_tool_choice_naming_no_tool_is_tool_invalid(workdir):
    spec = tool_spec(workdir, tool_choice="lookup_wether")
    found = problem(spec)
    assert found.code == "tool_invalid" and "'lookup_wether'" in found.message and "lookup_weather" in found.message
    assert f"{spec}:{line_of(spec, 'tool_choice:')}:" in found.message


def test_a_tool_choice_without_tools_is_tool_invalid(workdir):
    found = problem(tool_spec(workdir, tools=[], tool_choice="required"))
    assert found.code == "tool_invalid" and "declares no `tools`" in found.message


def test_tools_beside_an_output_schema_are_tool_invalid(workdir):
    found = problem(tool_spec(workdir, output={"schema": {"type": "object", "properties": {}}}))
    assert found.code == "tool_invalid" and "takes no `output: {schema: ...}`" in found.message


def test_a_missing_parameters_file_is_tool_schema_missing(workdir):
    spec = tool_spec(workdir, tools=[{**WEATHER, "parameters": "weather_args.json"}])
    found = problem(spec)
    assert found.code == "tool_schema_missing" and "weather_args.json" in found.message
    assert f"{spec}:{line_of(spec, 'weather_args.json')}:" in found.message


def test_a_parameters_file_in_schemas_is_read(workdir):
    (workdir / "schemas").mkdir()
    (workdir / "schemas" / "weather_args.json").write_text(json.dumps(WEATHER["parameters"]))
    report = api.validate(tool_spec(workdir, tools=[{**WEATHER, "parameters": "weather_args.json"}]))
    assert report is not None


def test_parameters_that_are_no_object_schema_are_schema_invalid(workdir):
    found = problem(tool_spec(workdir, tools=[{**WEATHER, "parameters": {"type": "string"}}]))
    assert found.code == "schema_invalid" and "tools[0].parameters" in found.message


def test_a_reduce_step_cannot_have_tools(workdir):
    spec = make_spec(workdir, rows=3, schema=None)
    data = yaml.safe_load(spec.read_text())
    data["steps"]["classify"].update(reduce={"group_by": ["text"]}, tools=[WEATHER])
    spec.write_text(yaml.safe_dump(data))
    found = problem(spec)
    assert found.code == "tool_invalid" and "reduce step" in found.message


def test_the_definitions_are_priced_in_every_request(workdir):
    (workdir / "plain").mkdir()
    (workdir / "tools").mkdir()
    plain = api.plan(make_spec(workdir / "plain", rows=3, schema=None), save=False)
    tooled = api.plan(tool_spec(workdir / "tools"), save=False)
    definitions = len(json.dumps([WEATHER])) // 4  # about one token per 4 characters of JSON
    per_row_plain = plain.steps["classify"]["input_tokens"] / 3
    (step,) = tooled.header.steps
    # the same prompt but for its first words ("Weather for" against "Review"), and the definitions
    assert step.counts.input_tokens / 3 - per_row_plain >= definitions * 0.6
    assert [t.name for t in step.tools] == ["lookup_weather"] and step.tool_choice == "required"
    assert set(step.schema["properties"]) == {"tool", "arguments", "calls", "text"}
    assert step.schema["properties"]["arguments"] == WEATHER["parameters"]
