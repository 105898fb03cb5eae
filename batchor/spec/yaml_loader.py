"""Strict YAML reading for specs: duplicate keys rejected, every key path mapped to its line.

PyYAML silently keeps the last of duplicate keys; we compose the node tree ourselves so that a
duplicate is an error and validation messages can point at `file:line` for any key path.
`${VAR}` / `${VAR:-default}` in string values are expanded from the environment here, at load
time only: row data never passes through this module.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from batchor.errors import EnvVarMissingError, SpecYamlError

_ENV_PATTERN = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_scalar_constructor = yaml.SafeLoader("")

Lines = dict[tuple[Any, ...], int]


def load_yaml(text: str, source: str) -> tuple[Any, Lines]:
    """Parse YAML text into plain data plus a map from key path to 1-based line number."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark else source
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecYamlError(
            f"{where}: malformed YAML: {problem}",
            hint="check indentation, colons and quoting near that line",
        ) from None
    lines: Lines = {}
    if node is None:
        return None, lines
    return _build(node, (), lines, source), lines


def _build(node: yaml.Node, path: tuple[Any, ...], lines: Lines, source: str) -> Any:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        return _build_mapping(node, path, lines, source)
    if isinstance(node, yaml.SequenceNode):
        return [_build(item, path + (i,), lines, source) for i, item in enumerate(node.value)]
    value = _scalar_constructor.construct_object(node, deep=True)
    if isinstance(value, str) and node.tag == "tag:yaml.org,2002:str":
        return expand_env(value, f"{source}:{node.start_mark.line + 1}")
    return value


def _build_mapping(node: yaml.MappingNode, path: tuple[Any, ...], lines: Lines, source: str) -> dict[Any, Any]:
    result: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            raise SpecYamlError(f"{source}:{key_node.start_mark.line + 1}: YAML merge keys (<<) are not supported")
        key = _scalar_constructor.construct_object(key_node, deep=True)
        if key in result:
            first = lines.get(path + (key,), "?")
            raise SpecYamlError(
                f"{source}:{key_node.start_mark.line + 1}: duplicate key '{key}' "
                f"(first defined on line {first})",
                hint="remove one of the two entries; YAML would silently keep only the last",
            )
        result[key] = _build(value_node, path + (key,), lines, source)
        lines[path + (key,)] = key_node.start_mark.line + 1
    return result


def expand_env(value: str, where: str) -> str:
    """Expand ${VAR} and ${VAR:-default}; `$$` is a literal `$`."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        raise EnvVarMissingError(
            f"{where}: environment variable {name} is not set (used as ${{{name}}})",
            hint=f"export {name}=..., or write ${{{name}:-default}} to give a default",
        )

    if "$" not in value:
        return value
    return _ENV_PATTERN.sub(replace, value)


def read_spec_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecYamlError(f"spec file not found: {path}", hint="check the path") from None
    except UnicodeDecodeError as exc:
        raise SpecYamlError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise SpecYamlError(f"cannot read spec {path}: {exc.strerror}") from None
