"""Plan stage fast path: render simple templates column-wise with Arrow, not Jinja row by row.

Most prompts are literal text with `{{ row.col }}` holes. Such a template renders to exactly
what Jinja renders (text cells as they are, NULL as '' like `finalize`), so a whole batch is
rendered by concatenating Arrow columns, and its canonical-JSON body by concatenating the
JSON-escaped pieces (escaping is per character, so literals are escaped once and only cells
holding a quote, backslash or control character are escaped in Python). Anything else (filters,
tags, `when`, non-text columns) returns None here and takes the Jinja path. The bodies are keyed
by `request.StepRequests.keys`, the same hash as every other path.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import jinja2
import pyarrow as pa
import pyarrow.compute as pc
from jinja2 import nodes

from batchor.spec.templates import make_environment

_ROW = "row"
_NEEDS_ESCAPE = r'[\x00-\x1f"\\]'  # what json.dumps escapes when ensure_ascii=False
_escape = json.encoder.encode_basestring


@dataclass(frozen=True)
class ColumnTemplate:
    """A template as literal text and column references: ((is_column, text or name), ...)."""

    parts: tuple[tuple[bool, str], ...]

    @property
    def columns(self) -> set[str]:
        return {text for is_column, text in self.parts if is_column}

    def render(self, batch: pa.RecordBatch) -> pa.Array | str:
        """The rendered text per row, or one str when the template uses no column."""
        if not self.columns:
            return "".join(text for _, text in self.parts)
        return _join([_text_column(batch, text) if is_col else text for is_col, text in self.parts], batch)

    def render_json(self, batch: pa.RecordBatch) -> list[pa.Array | str]:
        """JSON-escaped pieces (no quotes) whose concatenation is the escaped rendered text."""
        return [_escaped(_text_column(batch, text)) if is_col else _escape(text)[1:-1] for is_col, text in self.parts]


def column_template(source: str | None) -> ColumnTemplate | None:
    """The template as a ColumnTemplate, or None when it needs Jinja."""
    if source is None:
        return None
    try:
        ast = make_environment().parse(source)
    except jinja2.TemplateSyntaxError:
        return None
    parts: list[tuple[bool, str]] = []
    for output in ast.body:
        if not isinstance(output, nodes.Output):
            return None
        for node in output.nodes:
            part = _part(node)
            if part is None:
                return None
            parts.append(part)
    return ColumnTemplate(tuple(parts))


def _part(node: nodes.Node) -> tuple[bool, str] | None:
    if isinstance(node, nodes.TemplateData):
        return False, node.data
    if isinstance(node, nodes.Const) and isinstance(node.value, str):
        return False, node.value
    target = getattr(node, "node", None)
    if not (isinstance(target, nodes.Name) and target.name == _ROW):
        return None
    if isinstance(node, nodes.Getattr) and not hasattr({}, node.attr):  # row.items is dict.items
        return True, node.attr
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
        return True, node.arg.value
    return None


def text_columns_only(templates: list[ColumnTemplate], schema: pa.Schema) -> bool:
    """True when every referenced column is text (other types print as Python would)."""
    names = set(schema.names)
    for template in templates:
        for column in template.columns:
            if column not in names or not _is_text(schema.field(column).type):
                return False
    return True


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)


def _text_column(batch: pa.RecordBatch, name: str) -> pa.Array:
    column = batch.column(name)
    if not pa.types.is_string(column.type):
        column = column.cast(pa.string())
    return pc.fill_null(column, "") if column.null_count else column


def _escaped(column: pa.Array) -> pa.Array:
    needs = pc.match_substring_regex(column, _NEEDS_ESCAPE)
    if not pc.any(needs).as_py():
        return column
    values = column.filter(needs).to_pylist()
    return pc.replace_with_mask(column, needs, pa.array([_escape(v)[1:-1] for v in values], pa.string()))


def _join(pieces: list[pa.Array | str], batch: pa.RecordBatch) -> pa.Array:
    if len(pieces) == 1 and not isinstance(pieces[0], str):
        return pieces[0]
    args: list[Any] = [pa.scalar(p, pa.string()) if isinstance(p, str) else p for p in pieces]
    return pc.binary_join_element_wise(*args, "")


@dataclass(frozen=True)
class FastStep:
    """The messages of one step as column templates (system optional)."""

    system: ColumnTemplate | None
    prompt: ColumnTemplate

    def messages(self) -> list[tuple[str, ColumnTemplate]]:
        roles = [("system", self.system)] if self.system is not None else []
        return [*roles, ("user", self.prompt)]

    def render(self, batch: pa.RecordBatch) -> list[tuple[str, pa.Array | str]]:
        """(role, content per row or constant) for each message."""
        return [(role, tpl.render(batch)) for role, tpl in self.messages()]

    def bodies(self, batch: pa.RecordBatch) -> pa.Array:
        """canonical_json(messages) per row: sorted keys, no spaces, UTF-8 kept."""
        pieces: list[pa.Array | str] = ["["]
        for i, (role, tpl) in enumerate(self.messages()):
            pieces.append(("," if i else "") + '{"content":"')
            pieces.extend(tpl.render_json(batch))
            pieces.append('","role":' + json.dumps(role) + "}")
        pieces.append("]")
        return _join(_merge_literals(pieces), batch)


def fast_step(system: str | None, prompt: str, when: str | None, schema: pa.Schema) -> FastStep | None:
    """A FastStep when the step's templates allow it for this input, else None."""
    if when is not None:
        return None
    system_tpl = column_template(system) if system is not None else None
    prompt_tpl = column_template(prompt)
    if prompt_tpl is None or (system is not None and system_tpl is None):
        return None
    used = [t for t in (system_tpl, prompt_tpl) if t is not None]
    return FastStep(system_tpl, prompt_tpl) if text_columns_only(used, schema) else None


def _merge_literals(pieces: list[pa.Array | str]) -> list[pa.Array | str]:
    merged: list[pa.Array | str] = []
    for piece in pieces:
        if isinstance(piece, str) and merged and isinstance(merged[-1], str):
            merged[-1] += piece
        else:
            merged.append(piece)
    return merged
