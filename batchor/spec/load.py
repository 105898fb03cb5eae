"""Spec loading: YAML text -> validated `JobSpec`, errors pointing at file:line and key path."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from batchor.errors import BatchorError, Problems, SpecError, raise_problems
from batchor.schema.tools import Tool, output_schema
from batchor.spec.model import STEP_TAGS, JobSpec, SchemaOutput
from batchor.spec.schema_files import read_schema_file
from batchor.spec.sql_guard import check_spec_sql
from batchor.spec.tools import resolve_tools
from batchor.spec.yaml_loader import Lines, load_yaml, read_spec_text


@dataclass(frozen=True)
class LoadedSpec:
    """A validated spec plus where it came from (relative paths resolve against `base_dir`)."""

    spec: JobSpec
    base_dir: Path
    source: str  # file path or "<string>"
    text: str  # the spec as written, for the plan snapshot
    schemas: dict[str, dict[str, Any] | None]  # step -> resolved JSON schema (None: text; a tool step's: its calls')
    lines: Lines = field(default_factory=dict)  # key path -> line in `source`, for error messages
    text_lines: Lines = field(default_factory=dict)  # key path -> line a text value starts on
    tools: dict[str, list[Tool]] = field(default_factory=dict)  # step -> its tools (steps with `tools:` only)

    def where(self, *path: Any) -> str:
        """`file:line` of the nearest key of `path` written in the spec (the file alone if none)."""
        line = _line_for(tuple(path), self.lines)
        return f"{self.source}:{line}" if line else self.source

    def where_in_text(self, path: tuple[Any, ...], line_in_text: int) -> str:
        """`file:line` of line `line_in_text` (1-based) of the text value at `path`."""
        start = self.text_lines.get(path)
        return f"{self.source}:{start + line_in_text - 1}" if start else self.where(*path)

    def resolve(self, relative: str) -> Path:
        path = Path(relative).expanduser()
        return path if path.is_absolute() else (self.base_dir / path)


def load_spec(spec: str | Path | dict[str, Any], *, base_dir: Path | None = None) -> LoadedSpec:
    """Load a spec from a file path, a YAML string or a dict; every problem found is reported at once."""
    problems: list[BatchorError] = []
    if isinstance(spec, dict):
        lines: Lines = {}
        text_lines: Lines = {}
        text, source, data = json.dumps(spec), "<dict>", spec
        base = base_dir or Path.cwd()
    elif isinstance(spec, Path) or ("\n" not in spec and spec.endswith((".yaml", ".yml"))):
        path = Path(spec)
        text, source, base = read_spec_text(path), str(path), (base_dir or path.parent.resolve())
        data, lines, text_lines, problems = load_yaml(text, source)
    else:
        text, source, base = spec, "<string>", base_dir or Path.cwd()
        data, lines, text_lines, problems = load_yaml(text, source)
    if not isinstance(data, dict):
        raise_problems(problems + [SpecError(f"{source}: a spec must be a YAML mapping (name:, input:, model:, ...)")])
    try:
        job = JobSpec.model_validate(data)
    except ValidationError as exc:
        raise_problems(problems + _spec_errors(exc, source, lines, data))
    raise_problems(problems)
    found = Problems()
    schemas, tools = {}, {}

    def where(*path: Any) -> str:
        line = _line_for(tuple(path), lines)
        return f"{source}:{line}" if line else source

    for name, step in job.steps.items():
        with found.check():
            schemas[name] = _resolve_schema(getattr(step, "output", None), base, source, lines, name)
        with found.check():
            if step_tools := resolve_tools(step, name, base, where):
                tools[name] = step_tools
                schemas[name] = output_schema(step_tools, step.tool_choice)  # type: ignore[union-attr]
    found.raise_all()
    loaded = LoadedSpec(
        spec=job,
        base_dir=base,
        source=source,
        text=text,
        schemas=schemas,
        lines=lines,
        text_lines=text_lines,
        tools=tools,
    )
    check_spec_sql(loaded)
    return loaded


def _spec_errors(exc: ValidationError, source: str, lines: Lines, data: Any) -> list[BatchorError]:
    """One problem per key path (a union type gives several messages for one wrong value)."""
    by_path: dict[tuple[Any, ...], list[str]] = {}
    for err in exc.errors():
        messages = by_path.setdefault(_key_path(err["loc"], data), [])
        if _message(err) not in messages:
            messages.append(_message(err))
    problems: list[BatchorError] = []
    for path, messages in by_path.items():
        line = _line_for(path, lines)
        where = f"{source}:{line}" if line else source
        dotted = ".".join(str(p) for p in path) or "(top level)"
        problems.append(
            SpecError(
                f"{where}: {dotted}: {'; or '.join(messages)}",
                hint="see docs/reference/spec-keys.md or schemas/batchor-spec.schema.json",
            )
        )
    return problems


def _message(err: Mapping[str, Any]) -> str:
    if err["type"] == "extra_forbidden":
        return "unknown key (check its spelling; see the spec reference)"
    if err["type"] == "missing":
        return "required key is missing"
    return str(err["msg"])


_VALIDATOR_PARTS = ("function-", "literal[", "str", "dict")  # pydantic's names for validators, not keys


def _has(node: Any, part: Any) -> bool:
    """Whether `part` is an existing key (mapping) or index (list) of `node`."""
    if isinstance(node, dict):
        return part in node
    return isinstance(node, list) and isinstance(part, int) and part < len(node)


def _key_path(loc: tuple[Any, ...], data: Any) -> tuple[Any, ...]:
    """Keep only the parts of a pydantic location that are real keys in the data."""
    path: list[Any] = []
    node = data
    for part in loc:
        if part in STEP_TAGS:  # the union's tag, not a key the user wrote
            continue
        if _has(node, part):
            path.append(part)
            node = node[part]
        elif isinstance(part, str) and not part.startswith(_VALIDATOR_PARTS) and "[" not in part:
            path.append(part)  # a missing or unknown key: still worth naming
            node = None
    return tuple(path)


def _line_for(path: tuple[Any, ...], lines: Lines) -> int | None:
    for cut in range(len(path), -1, -1):
        if path[:cut] in lines:
            return lines[path[:cut]]
    return None


def _resolve_schema(output: Any, base: Path, source: str, lines: Lines, step: str) -> dict[str, Any] | None:
    if not isinstance(output, SchemaOutput):
        return None
    where = f"steps.{step}.output.schema"
    line = lines.get(("steps", step, "output", "schema"))
    loc = f"{source}:{line}" if line else source
    if isinstance(output.schema_, dict):
        return output.schema_
    return read_schema_file(output.schema_, base, f"{loc}: {where}")
