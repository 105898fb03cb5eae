"""CSV and TSV outputs escape spreadsheet formulas: answers and rows are data, never formulas.

A cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage return is run as a formula by
Excel, LibreOffice and Google Sheets when the file is opened (`=HYPERLINK(...)` in an answer can
send the sheet's data elsewhere). So text cells starting with one of those get a leading `'`,
which spreadsheets show as text (the OWASP advice); plain numbers (`-5`, `+1.5e3`) are left as
they are. `output.escape_formulas: false` writes every cell as it is. Parquet, JSONL and DuckDB
outputs hold typed values and are never changed.
"""

from __future__ import annotations

import re
from typing import Any

# One pattern over the whole cell, so the value is read once: = @ tab CR first, or a sign first in
# a cell that is not only a number's characters (RE2 has no lookahead, hence three branches).
_RISKY = r"'(?s)^([=@\t\r].*|[+-].*[^0-9.eE+-].*|[+-])$'"
_QUOTED = r"'''\1'"  # SQL for the text: a quote, then the matched cell
_ITEM = re.compile(r'^(.*) AS ("(?:[^"]|"")*")$', re.S)


def text_columns(db: Any, query: str) -> set[str]:
    """The names of the query's VARCHAR columns. Binding the query may read a stream: give it an
    empty `rows` of the same schema."""
    return {name for name, kind, *_ in db.execute(f"DESCRIBE {query}").fetchall() if kind == "VARCHAR"}


def escaped_items(select: list[str], names: set[str]) -> list[str]:
    """SELECT items (`expr AS "name"`) with each named text column's formula-like cells given a
    leading `'`. The items stay one plain projection, so the output keeps the rows' order."""
    out = []
    for item in select:
        match = _ITEM.match(item)
        if match is None or match.group(2)[1:-1].replace('""', '"') not in names:
            out.append(item)
            continue
        expr, alias = match.groups()
        out.append(f"regexp_replace(({expr}), {_RISKY}, {_QUOTED}) AS {alias}")
    return out


_RISKY_CELL = re.compile(r"^([=@\t\r].*|[+-].*[^0-9.eE+-].*|[+-])$", re.S)


def escaped_cell(value: Any) -> Any:
    """One Python cell escaped as `escaped_items` escapes a column (text only)."""
    return f"'{value}" if isinstance(value, str) and _RISKY_CELL.match(value) else value
