"""What the drafter is shown of the data: the columns with their types and, unless told not to,
the first few rows (long values cut), read by the same reader as a spec's input."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from batchor.errors import InputEmptyError
from batchor.spec.inputs import InputReader, resolve_input

LONGEST_VALUE = 300  # characters of one sample value; the drafter needs the gist, not the text


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    unique: bool = False  # an id-like column whose values are all different and never empty: a key

    def __str__(self) -> str:
        return f"{self.name}: {self.type}" + (" (unique: can be the key)" if self.unique else "")


@dataclass(frozen=True)
class DataSample:
    """The data file as the drafter sees it."""

    path: Path
    columns: list[Column]
    rows_total: int
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def rows_as_json(self) -> list[str]:
        return [json.dumps(row, ensure_ascii=False, default=str) for row in self.rows]


def read_sample(path: Path, rows: int) -> DataSample:
    """Columns, row count and the first `rows` rows (0: none) of the file at `path`."""
    source = resolve_input(str(path), Path.cwd(), None, None, None, [])
    reader = InputReader(source)
    try:
        described = reader.query("DESCRIBE source").fetchall()
        columns = [Column(str(name), _type_name(str(kind)), _is_key(reader, str(name))) for name, kind, *_ in described]
        sample: list[dict[str, Any]] = []
        if rows > 0:
            result = reader.query(f"SELECT * FROM source LIMIT {int(rows)}")
            names = [d[0] for d in result.description]
            sample = [{n: _cut(v) for n, v in zip(names, values, strict=True)} for values in result.fetchall()]
        total = reader.count()
        if total == 0:  # nothing a draft could fix: stop before any model is asked
            raise InputEmptyError(f"input: {path} has no rows", hint="draft from a file with a header and some rows")
        return DataSample(path=source.files[0], columns=columns, rows_total=total, rows=sample)
    finally:
        reader.close()


def _looks_like_id(name: str) -> bool:
    lowered = name.lower()
    return lowered in ("id", "key", "uuid") or lowered.endswith(("_id", "_key", "id"))


def _is_key(reader: InputReader, name: str) -> bool:
    """Whether an id-like column identifies every row (checked on the whole file, id-like names only)."""
    if not _looks_like_id(name):
        return False
    column = '"' + name.replace('"', '""') + '"'
    total, distinct, empty = reader.query(
        f"SELECT count(*), count(DISTINCT {column}), count(*) FILTER ({column} IS NULL) FROM source"
    ).fetchall()[0]
    return bool(total) and total == distinct and not empty


def _type_name(duckdb_type: str) -> str:
    """CSV cells are read as text (VARCHAR); other formats keep their own types."""
    return "text" if duckdb_type == "VARCHAR" else duckdb_type.lower()


def _cut(value: Any) -> Any:
    if isinstance(value, str) and len(value) > LONGEST_VALUE:
        return value[:LONGEST_VALUE] + "..."
    return value
