"""Prompt templates: sandboxed Jinja with strict undefined names.

Templates come from the spec, never from row data: a cell containing `{{ ... }}` is rendered as
the literal text it is. The sandbox blocks Python internals and reaches no environment variable.
Templates read no file, except that `{% include %}`, `{% import %}` and `{% from %}` read constant
names from the spec's `templates:` folder (inside the project; symlinks resolved, a path leaving
it refused: `template_include`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from batchor.errors import Problems, TemplateError, TemplateIncludeError, TemplateUndefinedError


def _tojson(value: Any, indent: int | None = None) -> str:
    """JSON without HTML/ASCII escaping (Jinja's own tojson costs 2-3x the tokens)."""
    return json.dumps(value, ensure_ascii=False, indent=indent, default=str)


def _blank_none(value: Any) -> Any:
    """Missing cells (NULL) render as empty text, not the string 'None'."""
    return "" if value is None else value


class _FolderLoader(jinja2.BaseLoader):
    """Templates from one folder only: the name resolved (symlinks followed) must stay inside it.
    Without a folder, every include is refused with the way to declare one."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder.resolve() if folder is not None else None

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Any]:
        if self.folder is None:
            raise TemplateIncludeError(
                f"template includes '{template}', but the spec declares no `templates:` folder",
                hint="put shared templates in a folder of the project and add `templates: that/folder` to the spec",
            )
        path = (self.folder / template).resolve()
        if not path.is_relative_to(self.folder):
            raise TemplateIncludeError(
                f"template includes '{template}', which leaves the templates folder {self.folder}",
                hint="include only files inside the `templates:` folder (no absolute paths, `..` or links out)",
            )
        if not path.is_file():
            raise jinja2.TemplateNotFound(template)
        mtime = path.stat().st_mtime
        return path.read_text(encoding="utf-8"), str(path), lambda: path.stat().st_mtime == mtime


def templates_folder(base_dir: Path, templates: str | None) -> Path | None:
    """The spec's `templates:` folder (relative to the spec), refused outside the project."""
    if templates is None:
        return None
    from batchor.spec.sql_guard import project_root

    folder = (Path(base_dir) / templates).resolve()
    root = project_root(Path(base_dir))
    if not folder.is_relative_to(root):
        raise TemplateIncludeError(
            f"templates: {templates} resolves to {folder}, outside the project folder {root}",
            hint="keep the templates folder inside the project (the git repository holding the spec)",
        )
    return folder


@lru_cache(maxsize=32)
def make_environment(templates: Path | None = None) -> ImmutableSandboxedEnvironment:
    """The sandbox; `templates` is the only folder includes read from (see module doc).

    One per folder and process: the environment is never changed after this, and reusing it lets
    `_parsed` keep each template's compiled form (Jinja's compile is ~30 ms of CPU a step, paid
    again by every plan, pilot round and apply). An included file is still read again when it
    changes (the loader's up-to-date check)."""
    env = ImmutableSandboxedEnvironment(
        undefined=jinja2.StrictUndefined,
        loader=_FolderLoader(templates),
        autoescape=False,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_blank_none,
    )
    env.filters["tojson"] = _tojson
    env.globals.clear()
    env.globals.update(range=range, dict=dict, len=len)
    return env


@dataclass
class StepTemplates:
    """The compiled templates of one step and the names they use."""

    step: str
    system: jinja2.Template | None
    prompt: jinja2.Template
    when: jinja2.Template | None
    row_columns: set[str] = field(default_factory=set)  # row.<col> references
    step_refs: set[str] = field(default_factory=set)  # earlier steps used
    dynamic_row_access: bool = False  # row[expr]: columns only checked while rendering
    asts: dict[str, nodes.Template] = field(default_factory=dict)  # part (system/prompt/when) -> parsed
    attachments: list[Any] = field(default_factory=list)  # compiled `attachments:` expressions
    prompt_key: str = "prompt"  # the spec key the prompt template came from (`embed` for an embedding step)

    def key_of(self, part: str) -> str:
        """The spec key of a template part, for messages and line numbers."""
        return self.prompt_key if part == "prompt" else part

    def render_messages(self, context: dict[str, Any]) -> list[dict[str, str]]:
        messages = []
        if self.system is not None:
            messages.append({"role": "system", "content": self.system.render(context)})
        messages.append({"role": "user", "content": self.prompt.render(context)})
        return messages

    def static_head(self, part: str) -> tuple[str, bool]:
        """What `part` (system or prompt) renders the same for every row: its leading literal text
        (up to the first `{{ }}` or `{% %}`), and whether that is the whole template."""
        ast, template = self.asts.get(part), getattr(self, part, None)
        if ast is None or template is None:
            return "", True
        head: list[str] = []
        for node in ast.body:
            children = node.nodes if isinstance(node, nodes.Output) else [node]
            for child in children:
                if not isinstance(child, nodes.TemplateData):
                    return "".join(head), False
                head.append(child.data)
        return template.render({}), True  # exactly as rendered (a trailing newline dropped)

    def render_attachments(self, context: dict[str, Any]) -> list[Any]:
        """The values of the `attachments:` expressions, lists flattened, empty values dropped."""
        values: list[Any] = []
        for expression in self.attachments:
            value = expression(context)
            for item in value if isinstance(value, (list, tuple)) else [value]:
                if item is not None and item != "":
                    values.append(item)
        return values

    def when_reads_only_the_row(self) -> bool:
        """Whether `when:` can be decided before the earlier steps answer (it names no step)."""
        from jinja2 import meta

        ast = self.asts.get("when")
        return ast is not None and not (meta.find_undeclared_variables(ast) & self.step_refs)

    def should_run(self, context: dict[str, Any]) -> bool:
        if self.when is None:
            return True
        return self.when.render(context).strip().lower() not in ("false", "0", "", "none", "no")


def compile_step(
    env: ImmutableSandboxedEnvironment,
    step: str,
    system: str | None,
    prompt: str,
    when: str | None,
    known_steps: set[str],
    attachments: Sequence[str] = (),
    prompt_key: str = "prompt",
) -> StepTemplates:
    """Parse a step's templates and find which columns and steps they reference."""
    compiled = StepTemplates(
        step=step,
        system=None,
        prompt=None,  # type: ignore[arg-type]
        when=None,
        prompt_key=prompt_key,
    )
    parts = {"system": system, "prompt": prompt, "when": ("{{ " + when + " }}") if when else None}
    parts.update({f"attachments[{i}]": "{{ " + source + " }}" for i, source in enumerate(attachments)})
    found = Problems()
    for part, source in parts.items():
        if source is None:
            continue
        key = compiled.key_of(part)
        where = f"steps.{step}.{key}"
        path = ("steps", step, *_key_path(key))
        with found.check():
            try:
                ast, template = _parsed(env, source)
            except jinja2.TemplateSyntaxError as exc:
                raise TemplateError(
                    f"{where}: template syntax error on line {exc.lineno}: {exc.message}",
                    hint="Jinja syntax: {{ row.column }}, {% if ... %}...{% endif %}",
                    path=path,
                    line=exc.lineno,
                ) from None
            compiled.asts[part] = ast
            _check_includes(env, ast, where)
            _collect_refs(ast, compiled, where, known_steps, path)
            if part.startswith("attachments"):
                compiled.attachments.append(env.compile_expression(source[3:-3], undefined_to_none=False))
            else:
                setattr(compiled, part, template)
    found.raise_all()
    return compiled


@lru_cache(maxsize=1024)
def _parsed(env: ImmutableSandboxedEnvironment, source: str) -> tuple[nodes.Template, jinja2.Template]:
    """A template's syntax tree (read, never changed, by the checks) and its compiled form. Parsed
    twice because compiling may rewrite the tree it is given."""
    return env.parse(source), env.from_string(source)


def _check_includes(env: ImmutableSandboxedEnvironment, ast: nodes.Template, where: str) -> None:
    """Every included or imported template is a constant name the loader accepts, checked now
    (a name computed from a row would let data choose which file is read)."""
    for node in ast.find_all((nodes.Include, nodes.Import, nodes.FromImport)):
        assert isinstance(node, (nodes.Include, nodes.Import, nodes.FromImport))
        names = node.template.items if isinstance(node.template, (nodes.List, nodes.Tuple)) else [node.template]
        missing = []
        for name in names:
            if not (isinstance(name, nodes.Const) and isinstance(name.value, str)):
                raise TemplateIncludeError(
                    f"{where}: an include or import names its template with an expression",
                    hint="name the template file as a quoted constant, e.g. {% include 'review.j2' %}",
                )
            try:
                env.loader.get_source(env, name.value)  # type: ignore[union-attr]
            except TemplateIncludeError as exc:
                raise TemplateIncludeError(f"{where}: {exc.message}", hint=exc.hint) from None
            except jinja2.TemplateNotFound:
                missing.append(name.value)
        if missing and len(missing) == len(names):  # a list includes the first that exists
            raise TemplateError(f"{where}: included template '{missing[0]}' not found")


def _key_path(key: str) -> tuple[str | int, ...]:
    """`attachments[0]` -> ("attachments", 0): the key path of a template part in the spec."""
    name, _, index = key.partition("[")
    return (name, int(index.rstrip("]"))) if index else (name,)


def _collect_refs(
    ast: nodes.Template, compiled: StepTemplates, where: str, known_steps: set[str], path: tuple[Any, ...] = ()
) -> None:
    from jinja2 import meta

    for name in meta.find_undeclared_variables(ast):
        if name == "row" or name in known_steps or name in ("range", "dict", "len", "loop"):
            if name in known_steps:
                compiled.step_refs.add(name)
            continue
        hint = f"use row.{name} for an input column" if name not in known_steps else None
        line = next((n.lineno for n in ast.find_all(nodes.Name) if n.name == name), 1)
        raise TemplateUndefinedError(
            f"{where}: template uses '{name}', which is neither `row` nor an earlier step",
            hint=hint or "declare the step before using it",
            path=path,
            line=line,
        )
    column_uses = 0
    for node in ast.find_all((nodes.Getattr, nodes.Getitem)):
        assert isinstance(node, (nodes.Getattr, nodes.Getitem))
        target = node.node
        if isinstance(target, nodes.Name) and target.name == "row":
            column_uses += 1
            if isinstance(node, nodes.Getattr):
                compiled.row_columns.add(node.attr)
            elif isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
                compiled.row_columns.add(node.arg.value)
            else:
                compiled.dynamic_row_access = True
    # `{{ row | tojson }}`, `{% for k in row %}` or an included template may read any column.
    bare_row = sum(1 for n in ast.find_all(nodes.Name) if n.name == "row") > column_uses
    if bare_row or any(True for _ in ast.find_all((nodes.Include, nodes.Import, nodes.FromImport))):
        compiled.dynamic_row_access = True


def check_columns(compiled: StepTemplates, columns: list[str]) -> None:
    """Fail before any call when a template names a column the input does not have."""
    missing = sorted(compiled.row_columns - set(columns))
    if missing:
        raise TemplateUndefinedError(
            f"steps.{compiled.step}: template uses column(s) {', '.join(missing)} "
            f"not in the input (columns: {', '.join(columns)})",
            hint="fix the column name in the template, or add the column to the input/sql",
        )


def render_error(step: str, exc: Exception, row_key: str) -> TemplateUndefinedError:
    return TemplateUndefinedError(
        f"steps.{step}: template failed for row {row_key}: {exc}",
        hint="check the names used in the template against the row's columns and earlier steps",
    )
