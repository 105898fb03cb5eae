"""Review files: CSV or JSON Lines, one row per answer to review.

Columns: `_job` and `_step` (what the row belongs to), `_row_key`, the input columns, the step's
answer fields as the model gave them, `_model`, then one blank `review.<field>` column per answer
field (`review.text` for a text step). A reviewer fills in the cells to correct; a blank cell
keeps the model's answer. CSV cells are text: a value is read by its field's type on import.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from batchor.errors import ReviewFileError

FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
REVIEW_PREFIX = "review."
META = ("_job", "_step", "_row_key")


def file_format(path: Path) -> str:
    """csv or jsonl, from the file name; anything else is refused."""
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ReviewFileError(
            f"{path}: a review file is .csv or .jsonl, not '{path.suffix or path.name}'",
            hint="name it review.csv or review.jsonl",
        )
    return fmt


def write_rows(path: Path, columns: list[str], rows: list[dict[str, Any]]) -> None:
    """Write atomically (a temp file, then rename), like every other output."""
    fmt = file_format(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    with temp.open("w", encoding="utf-8", newline="") as out:
        if fmt == "csv":
            writer = csv.DictWriter(out, fieldnames=columns)
            writer.writeheader()
            writer.writerows({c: _cell(row.get(c)) for c in columns} for row in rows)
        else:
            out.writelines(json.dumps({c: row.get(c) for c in columns}, ensure_ascii=False) + "\n" for row in rows)
    temp.replace(path)


def _cell(value: Any) -> Any:
    """A CSV cell: strings as they are, other values as JSON (lists, objects, booleans)."""
    if value is None or isinstance(value, str):
        return "" if value is None else value
    return json.dumps(value, ensure_ascii=False)


def read_rows(path: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """(columns, rows) of a review file; a file that cannot be read as its format is refused."""
    fmt = file_format(path)
    if not path.is_file():
        raise ReviewFileError(f"review file {path} not found", hint="name the file `review export` wrote")
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            if fmt == "csv":
                reader = csv.DictReader(handle)
                return list(reader.fieldnames or []), list(reader)
            rows = [json.loads(line) for line in handle if line.strip()]
    except (UnicodeDecodeError, ValueError, csv.Error) as exc:
        raise ReviewFileError(f"{path} is not a readable {fmt} file: {exc}") from None
    if not all(isinstance(r, dict) for r in rows):
        raise ReviewFileError(f"{path}: every line must be a JSON object")
    columns = list(dict.fromkeys(c for r in rows for c in r))
    return columns, rows


def is_blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())
