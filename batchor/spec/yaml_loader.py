"""Strict YAML reading for specs: duplicate keys rejected, every key path mapped to its line.

PyYAML silently keeps the last of duplicate keys; we compose the node tree ourselves so that a
duplicate is an error and validation messages can point at `file:line` for any key path. Plain
scalars that YAML 1.1 and 1.2 read differently (`NO`, `on`, `012`) are errors everywhere in the
spec, `params` included: quoting keeps them as written.
`${VAR}` / `${VAR:-default}` in string values are expanded from the environment here, at load
time only: row data never passes through this module.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from batchor.errors import BatchorError, EnvVarMissingError, SpecYamlError, UrlCredentialsError

_ENV_PATTERN = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_scalar_constructor = yaml.SafeLoader("")
# Plain scalars YAML 1.1 (PyYAML) and YAML 1.2 read differently: yes/no/on/off booleans, 012 octal,
# 0b101 binary, 1:30 base-60 and 1_000 numbers. Each one is refused with the two ways to write it.
_BOOL_TAG, _INT_TAG, _FLOAT_TAG = (f"tag:yaml.org,2002:{t}" for t in ("bool", "int", "float"))
_AMBIGUOUS_NUMBER = re.compile(r"[-+]?(0[0-7_]+|0b[01_]+|[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?|.*_.*)")

Lines = dict[tuple[Any, ...], int]


class YamlDoc(NamedTuple):
    data: Any
    lines: Lines  # key path -> 1-based line of the key
    text_lines: Lines  # key path of a text value -> line its text starts on (after `|` or `>`)
    problems: list[BatchorError]


def load_yaml(text: str, source: str) -> YamlDoc:
    """Parse YAML text into plain data, maps from key path to line, and the problems found.

    Problems (duplicate keys, YAML 1.1 scalars, missing env vars) do not stop the reading, so one
    pass reports all of them; the data keeps the first of duplicate keys and scalars as written.
    """
    try:
        node = _compose(text)
    except yaml.YAMLError as exc:
        raise _malformed(exc, text, source) from None
    builder = _Builder(source)
    if node is None:
        return YamlDoc(None, {}, {}, [])
    data = builder.build(node, ())
    return YamlDoc(data, builder.lines, builder.text_lines, builder.problems)


def _malformed(exc: yaml.YAMLError, text: str, source: str) -> SpecYamlError:
    """The parser's error at the line that matters. An unclosed quote runs on until the next quote
    and the parser stops lines later, so a line between where the parser's context began (its
    context mark) and where it gave up that opens a quote it does not close is named first."""
    problem = getattr(exc, "problem", None) or str(exc)
    mark, context = getattr(exc, "problem_mark", None), getattr(exc, "context_mark", None)
    line = mark.line + 1 if mark else None
    if context is not None and mark is not None and context.line != mark.line:
        problem = (
            f"{getattr(exc, 'context', None) or 'while parsing'} from line {context.line + 1}: {problem} on line {line}"
        )
        unclosed = _unclosed_quote(text.splitlines(), context.line, mark.line)
        if unclosed is not None:
            line, problem = unclosed + 1, f"the quote opened on line {unclosed + 1} is not closed on it ({problem})"
        elif str(getattr(exc, "context", "")).startswith(_OPENED):  # an unclosed bracket or quote: its start
            line = context.line + 1
    return SpecYamlError(
        f"{source}:{line}: malformed YAML: {problem}" if line else f"{source}: malformed YAML: {problem}",
        hint="check indentation, colons and quoting near that line",
    )


_OPENED = ("while scanning a quoted", "while parsing a flow")
_OPENS_QUOTE = re.compile(r"""^\s*(?:-\s+)?(?:[^\s#'"][^:#]*:\s+|-\s+)?(["'])(.*)$""")


def _unclosed_quote(lines: list[str], first: int, last: int) -> int | None:
    """The first line in [first, last) whose value opens a quote that the line does not close."""
    for number in range(first, min(last, len(lines))):
        found = _OPENS_QUOTE.match(lines[number])
        if found is None:
            continue
        quote, rest = found.groups()
        body = rest.replace("\\\\", "").replace('\\"', "") if quote == '"' else rest.replace("''", "")
        if quote not in body:
            return number
    return None


def _compose(text: str) -> yaml.Node | None:
    """The node tree, by libyaml when PyYAML has it (~15x faster than the pure parser, which
    cost a tenth of a small apply's CPU). A text libyaml refuses goes to the pure parser, so a
    YAML error reads exactly as before; the trees agree (tests/spec/test_yaml_libyaml.py)."""
    fast = getattr(yaml, "CSafeLoader", None)
    if fast is not None:
        try:
            return yaml.compose(text, Loader=fast)
        except yaml.YAMLError:
            pass
    return yaml.compose(text, Loader=yaml.SafeLoader)


class _Builder:
    """Turns a composed node tree into data, recording lines and problems on the way."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines: Lines = {}
        self.text_lines: Lines = {}
        self.problems: list[BatchorError] = []

    def build(self, node: yaml.Node, path: tuple[Any, ...]) -> Any:
        self.lines[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, path + (i,)) for i, item in enumerate(node.value)]
        return self._scalar(node, path)

    def _where(self, node: yaml.Node) -> str:
        return f"{self.source}:{node.start_mark.line + 1}"

    def _scalar(self, node: yaml.Node, path: tuple[Any, ...]) -> Any:
        if _is_ambiguous(node):
            self.problems.append(_ambiguous_error(node, self._where(node), path))
            return node.value
        value = _scalar_constructor.construct_object(node, deep=True)
        if isinstance(value, str) and node.tag == "tag:yaml.org,2002:str":
            self.text_lines[path] = node.start_mark.line + (2 if node.style in ("|", ">") else 1)
            if path and path[-1] == "base_url" and _ENV_PATTERN.search(value.replace("$$", "")):
                self.problems.append(_url_variable_error(self._where(node), path))
                return value
            try:
                return expand_env(value, self._where(node))
            except EnvVarMissingError as exc:
                self.problems.append(exc)
        return value

    def _mapping(self, node: yaml.MappingNode, path: tuple[Any, ...]) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                self.problems.append(
                    SpecYamlError(
                        f"{self._where(key_node)}: YAML merge keys (<<) are not supported",
                        hint="write the keys out in full",
                    )
                )
                continue
            key = self._scalar(key_node, path) if isinstance(key_node, yaml.ScalarNode) else self.build(key_node, path)
            if key in result:
                first = self.lines.get(path + (key,), "?")
                self.problems.append(
                    SpecYamlError(
                        f"{self._where(key_node)}: duplicate key '{key}' (first defined on line {first})",
                        hint="remove one of the two entries; YAML would silently keep only the last",
                    )
                )
                continue
            result[key] = self.build(value_node, path + (key,))
            self.lines[path + (key,)] = key_node.start_mark.line + 1
        return result


def _is_ambiguous(node: yaml.Node) -> bool:
    if not isinstance(node, yaml.ScalarNode) or node.style:  # quoted or block text: as written (plain: None or '')
        return False
    if node.tag == _BOOL_TAG:
        return node.value.lower() not in ("true", "false")
    return node.tag in (_INT_TAG, _FLOAT_TAG) and bool(_AMBIGUOUS_NUMBER.fullmatch(node.value))


def _ambiguous_error(node: yaml.Node, where: str, path: tuple[Any, ...]) -> SpecYamlError:
    dotted = ".".join(str(p) for p in path) or "(top level)"
    text = node.value
    if node.tag == _BOOL_TAG:
        meaning, fix = "the boolean " + str(text.lower() in ("yes", "on", "y")).lower(), "true or false"
    else:
        meaning, fix = f"the number {_scalar_constructor.construct_object(node)}", "the number in plain digits"
    return SpecYamlError(
        f"{where}: {dotted}: `{text}` reads as {meaning} in YAML 1.1 (PyYAML) but differently in YAML 1.2",
        hint=f"quote it ('{text}') to keep it as text, or write {fix}",
    )


def _url_variable_error(where: str, path: tuple[Any, ...]) -> UrlCredentialsError:
    return UrlCredentialsError(
        f"{where}: {'.'.join(str(p) for p in path)}: `${{VAR}}` in a base URL would be stored expanded in "
        "plan files (a token in the URL would leak)",
        hint="write the URL out (it is not secret), set the SDK's base-URL variable (OPENAI_BASE_URL, "
        "ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL), and keep secrets in the key variable",
    )


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
