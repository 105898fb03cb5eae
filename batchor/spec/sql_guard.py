"""Spec SQL is data with declared powers: one SELECT per field, run confined to the project.

A spec may come from a pull request, so its SQL (`input.sql`, SQL steps, the `sql`,
`distribution` and `aggregate` checks) must not act on the machine that runs it. Each field is
parsed without running it: it must be exactly one SELECT-like statement (no COPY, ATTACH,
INSTALL, LOAD, SET, PRAGMA, EXPORT, CREATE SECRET, ...). It then runs only in a
`batchor.duck.confined_db`: no network, no extension loaded, and files readable only inside the
project folder (the spec's git repository root, else the nearest folder holding `.batchor/`,
else the spec's folder), symlinks resolved. A relative path in the query reads from the spec's
folder, as before.
"""

from __future__ import annotations

import glob
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from batchor.duck import duckdb
from batchor.errors import BatchorError, PathOutsideProjectError, Problems, SqlNotAllowedError

_FIX = "write one SELECT query (WITH ... SELECT, FROM ..., VALUES are fine); batchor reads and writes files itself"


def check_query(sql: str, field: str, where: str) -> None:
    """Refuse `sql` unless it is exactly one SELECT-like statement (parsed, never run)."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0][:300]
        raise SqlNotAllowedError(f"{where}: {field} does not parse: {first}", hint=_FIX) from None
    if len(statements) != 1:
        raise SqlNotAllowedError(
            f"{where}: {field} holds {len(statements)} statements; a SQL field takes exactly one",
            hint="remove the `;` and what follows it: " + _FIX,
        )
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        name = str(kind).rsplit(".", 1)[-1]
        raise SqlNotAllowedError(f"{where}: {field} is a {name} statement, not a query", hint=_FIX)


def check_expression(expression: str, field: str, where: str) -> None:
    """Refuse a SQL expression that is not one expression (`1) FROM x; COPY ...` is two statements)."""
    check_query(f"SELECT ({expression}) FROM answers", field, where)


def spec_sql(spec: Any) -> Iterator[tuple[tuple[Any, ...], str, bool]]:
    """(key path, text, is_query) of every SQL field of a JobSpec (False: an expression)."""
    if spec.input.sql is not None:
        yield ("input", "sql"), spec.input.sql, True
    for name, step in spec.steps.items():
        if getattr(step, "sql", None) is not None:
            yield ("steps", name, "sql"), step.sql, True
        for i, check in enumerate(getattr(step, "checks", None) or []):
            yield from _check_sql(("steps", name, "checks", i), check)
    for i, check in enumerate(spec.checks):
        yield from _check_sql(("checks", i), check)


def _check_sql(path: tuple[Any, ...], check: Any) -> Iterator[tuple[tuple[Any, ...], str, bool]]:
    for key in ("sql", "distribution", "aggregate"):
        value = getattr(check, key)
        if value is not None:
            yield (*path, key), value, False


def check_spec_sql(loaded: Any) -> None:
    """Every SQL field of a loaded spec checked; all problems reported at once."""
    found = Problems()
    for path, text, is_query in spec_sql(loaded.spec):
        field = ".".join(str(p) for p in path)
        with found.check():
            (check_query if is_query else check_expression)(text, field, loaded.where(*path))
    found.raise_all()


def project_root(base_dir: Path) -> Path:
    """The folder spec SQL may read under: the git root above `base_dir`, else the nearest folder
    holding `.batchor/`, else `base_dir` itself."""
    start = Path(base_dir).resolve()
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    for folder in (start, *start.parents):
        if (folder / ".batchor").is_dir():
            return folder
    return start


def relative_files(sql: str, base_dir: Path) -> list[str]:
    """The query's relative string literals that name files inside the project (globs whose every
    match is inside), as written: DuckDB allows exactly these and reads them from `base_dir`."""
    root = project_root(base_dir)
    allowed = []
    for literal in string_literals(sql):
        if not literal or Path(literal).is_absolute() or literal.startswith("~"):
            continue
        full = str(Path(base_dir) / literal)
        matches = glob.glob(full, recursive=True) if any(ch in literal for ch in "*?[") else [full]
        if matches and all(Path(m).exists() and Path(m).resolve().is_relative_to(root) for m in matches):
            allowed.append(literal)
    return allowed


def confined_for(sql: str, base_dir: Path | str, *, small: bool = True, one_thread: bool = False) -> Any:
    """A confined connection for `sql` of a spec in `base_dir` (see module doc); the caller closes it."""
    from batchor.duck import confined_db

    base = Path(base_dir)
    return confined_db(
        [project_root(base)], relative_files(sql, base), search_path=base, small=small, one_thread=one_thread
    )


def refused_access(exc: BaseException, field: str, base_dir: Path | str | None) -> BatchorError | None:
    """A coded error for DuckDB's refusal to read a file (None: another error). `base_dir` None:
    the SQL may read no file at all (checks read the stored answers only)."""
    if not isinstance(exc, duckdb.PermissionException):
        return None
    quoted = re.search(r'"([^"]*)"', str(exc))
    name = f"'{quoted.group(1)}'" if quoted else "a file"
    where = (
        f"outside the project folder {project_root(Path(base_dir))}" if base_dir is not None else "but may read none"
    )
    return PathOutsideProjectError(
        f"{field}: reads {name}, {where} (spec SQL reads only its project's files; no network, no extensions)",
        hint="move the file into the project (the git repository holding the spec) and name it relative to the spec"
        if base_dir is not None
        else "a check reads the answers table only",
    )


def string_literals(sql: str) -> list[str]:
    """The string constants of `sql`, unquoted (DuckDB's tokenizer: comments and identifiers skipped)."""
    tokens = duckdb.tokenize(sql)
    literals = []
    for index, (start, kind) in enumerate(tokens):
        if kind != duckdb.token_type.string_const:
            continue
        end = tokens[index + 1][0] if index + 1 < len(tokens) else len(sql)
        text = sql[start:end].strip()
        if len(text) >= 2 and text[0] == text[-1] == "'":
            literals.append(text[1:-1].replace("''", "'"))
    return literals
