"""Plan stage: type-check what templates read, before any call.

Every `{{ row.column }}`, `{{ step.field }}` and `when:` expression is checked against what it
reads: the input's columns, an LLM step's output schema (its text, for a text step), or the
columns a SQL step returns (learnt by running the query with DuckDB on an empty, typed `rows`).
A misspelt name is an error with `file:line` and the closest names, found before the first step
is paid for, instead of a render failure after it.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from jinja2 import nodes

from batchor.errors import BatchorError, Problems, SpecError, TemplateUndefinedError, raise_problems
from batchor.plan.fanout_rows import order_steps
from batchor.plan.model import StepPlan
from batchor.plan.sql_step import derive_schema
from batchor.plan.step_kind import StepKind
from batchor.spec.load import LoadedSpec
from batchor.spec.templates import StepTemplates

_DICT_METHODS = frozenset({"items", "keys", "values", "get"})


@dataclass(frozen=True)
class Reference:
    """`root.a.b[0]` in a template: root is `row` or a step; path holds the names after it."""

    root: str
    path: tuple[str | int, ...]
    lineno: int  # line within the template text

    def text(self, upto: int) -> str:
        parts = [self.root] + [f"[{p}]" if isinstance(p, int) else f".{p}" for p in self.path[: upto + 1]]
        return parts[0] + "".join(parts[1:])


def references(ast: nodes.Template, roots: set[str]) -> list[Reference]:
    """Each attribute/item chain over a name in `roots` (inner chains too; dynamic parts end a chain)."""
    found = []
    for node in ast.find_all((nodes.Getattr, nodes.Getitem)):
        chain = _chain(node)
        if chain is not None and chain[0] in roots:
            found.append(Reference(chain[0], chain[1], node.lineno))
    return found


def _chain(node: nodes.Node) -> tuple[str, tuple[str | int, ...]] | None:
    path: list[str | int] = []
    while isinstance(node, (nodes.Getattr, nodes.Getitem)):
        if isinstance(node, nodes.Getattr):
            path.append(node.attr)
        elif isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, (str, int)):
            path.append(node.arg.value)
        else:
            return None  # row[expr]: only the part before it can be checked (its own chain)
        node = node.node
    if not isinstance(node, nodes.Name):
        return None
    return node.name, tuple(reversed(path))


def typed_steps(
    loaded: LoadedSpec,
    steps: list[StepPlan],
    templates: dict[str, StepTemplates],
    columns: list[str],
    found: Problems | None = None,
) -> list[StepPlan]:
    """Steps with their SQL output schemas, once every name the templates read is known to exist.
    With `found`, problems are added to it and the steps that could be typed are returned."""
    problems = found if found is not None else Problems()
    typed = steps
    with problems.check():
        typed = with_sql_schemas(loaded, steps, columns, problems if found is not None else None)
    by_name = {s.name: s for s in typed}
    with problems.check():  # with a broken SQL step, the other steps are still checked (it reads as free-form)
        check_references(loaded, [by_name.get(s.name, s) for s in steps], templates, columns)
    if found is None:
        problems.raise_all()
    return typed


def with_sql_schemas(
    loaded: LoadedSpec, steps: list[StepPlan], columns: list[str], found: Problems | None = None
) -> list[StepPlan]:
    """Check each SQL step's query and learn its output columns, upstream steps first. With
    `found`, problems are added to it and the steps that could be typed are returned."""
    resolved: dict[str, StepPlan] = {}
    problems: list[BatchorError] = []
    failed: set[str] = set()
    for step in order_steps(steps):
        if step.step_kind is StepKind.SQL:
            if failed & set(step.depends_on):
                failed.add(step.name)  # cannot be checked until the step it reads is fixed
                continue
            try:
                step = derive_schema(step, columns, {d: resolved[d] for d in step.depends_on}, str(loaded.base_dir))
            except SpecError as exc:
                problems.append(locate_sql_error(loaded, exc, step.name, step.prompt))
                failed.add(step.name)
                continue
        resolved[step.name] = step
    if found is not None:
        found.found.extend(problems)
        return [resolved[s.name] for s in steps if s.name in resolved]
    raise_problems(problems)
    return [resolved[s.name] for s in steps]


def locate_sql_error(loaded: LoadedSpec, exc: SpecError, step: str, sql: str) -> SpecError:
    """The SQL step's error at the spec line of the name DuckDB complained about, with its candidates."""
    quoted = re.search(r'"([^"]+)"', exc.message)
    line = 1
    if quoted:
        at = re.search(rf"\b{re.escape(quoted.group(1))}\b", sql)
        line = sql.count("\n", 0, at.start()) + 1 if at else 1
    return type(exc)(f"{loaded.where_in_text(('steps', step, 'sql'), line)}: {exc.message}", hint=exc.hint)


def check_references(
    loaded: LoadedSpec, steps: list[StepPlan], templates: dict[str, StepTemplates], columns: list[str]
) -> None:
    """Every name each template reads exists; raises all the problems found at once."""
    by_name = {s.name: s for s in steps}
    roots = set(by_name) | {"row"}
    found = Problems()
    reported: set[tuple[str, str]] = set()
    for name, compiled in templates.items():
        for part, ast in compiled.asts.items():
            for ref in references(ast, roots):
                problem = _check(ref, by_name, columns)
                if problem is None:
                    continue
                key = compiled.key_of(part)
                where = f"{loaded.where_in_text(('steps', name, key), ref.lineno)}: steps.{name}.{key}"
                if (where, problem[0]) not in reported:
                    reported.add((where, problem[0]))
                    found.found.append(TemplateUndefinedError(f"{where}: {problem[0]}", hint=problem[1]))
    found.raise_all()


def _check(ref: Reference, by_name: dict[str, StepPlan], columns: list[str]) -> tuple[str, str] | None:
    """(message, fix) when `ref` reads something that does not exist, else None."""
    if ref.root == "row":
        return _check_column(ref, columns)
    step = by_name[ref.root]
    if not ref.path or (step.local and step.schema is None):  # a SQL step whose query failed
        return None
    if step.kind == "embed":  # a list of floats: indexes and list methods only
        first = ref.path[0]
        return (
            None
            if isinstance(first, int) or hasattr(list, str(first))
            else (
                f"`{ref.text(0)}`: step '{step.name}' is an embedding step; its answer is a list of floats",
                f"write {{{{ {step.name} }}}} for the list, or {{{{ {step.name}[0] }}}} for one value",
            )
        )
    if step.schema is None:
        return _check_text(ref, step)
    return _check_schema(ref, step)


def _check_column(ref: Reference, columns: list[str]) -> tuple[str, str] | None:
    name = ref.path[0] if ref.path else None
    if not isinstance(name, str) or name in columns or name in _DICT_METHODS:
        return None
    return (
        f"`row.{name}`: the input has no column '{name}'{_did_you_mean(name, columns)} (columns: {', '.join(columns)})",
        "fix the column name, or add the column to the input or input.sql",
    )


def _check_text(ref: Reference, step: StepPlan) -> tuple[str, str] | None:
    first = ref.path[0]
    if isinstance(first, str) and hasattr(str, first):  # {{ summary.strip() }}: a method of the text
        return None
    return (
        f"`{ref.text(0)}`: step '{step.name}' is a text step; its answer is only its text",
        f"write {{{{ {step.name} }}}} for the text, or give the step `output: {{schema: ...}}` for fields",
    )


def _check_schema(ref: Reference, step: StepPlan) -> tuple[str, str] | None:
    schema: Any = step.schema
    for i, part in enumerate(ref.path):
        if not isinstance(schema, dict):
            return None
        if isinstance(part, int):
            schema = schema.get("items") if _is_type(schema, "array") else None
            continue
        properties = schema.get("properties")
        if not isinstance(properties, dict) or not properties:
            return None  # a free-form value: nothing to check against
        if part in properties:
            schema = properties[part]
            continue
        if part in _DICT_METHODS:
            return None
        source = "returns" if step.local else "outputs"
        return (
            f"`{ref.text(i)}`: step '{step.name}' {source} no field '{part}'{_did_you_mean(part, list(properties))}",
            f"use one of its fields ({', '.join(properties)}), or add '{part}' to the step's "
            + ("query" if step.local else "output schema"),
        )
    return None


def _is_type(schema: dict[str, Any], kind: str) -> bool:
    declared = schema.get("type")
    return declared == kind or (isinstance(declared, list) and kind in declared)


def _did_you_mean(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
