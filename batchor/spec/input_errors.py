"""Input problems in the user's words (spec/inputs.py reads the files): an unreadable or empty
file, a file that is not UTF-8, the first bad line of a JSONL file, a refused path, an error in
the spec's `sql:`. Each names the file and the fix, with a stable code from batchor/errors.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from batchor.duck import duckdb
from batchor.errors import BatchorError, InputEmptyError, InputEncodingError, InputError
from batchor.spec.input_source import InputSource
from batchor.spec.sql_guard import refused_access


def check_readable(path: Path) -> None:
    """An unreadable or empty input file, said plainly before DuckDB gives its own words to it."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(1)
    except PermissionError:
        raise InputError(f"input: cannot read {path} (permission denied)", hint="check file permissions") from None
    if not head:
        raise InputEmptyError(f"input: {path} is empty", hint="the file has no header and no rows")


def input_error(exc: duckdb.Error, source: InputSource) -> BatchorError:
    """DuckDB's error on reading an input, as the input problem it is (encoding, a bad JSON line,
    a refused path, the spec's `sql:`), naming the file and the fix."""
    full = str(exc).lower()
    text = str(exc).splitlines()[0][:400]
    names = ", ".join(p.name for p in source.files)
    # DuckDB's CSV reader names the encoding problem on a later line than its first one.
    if any(marker in full for marker in ("unicode", "not utf-8", "invalid utf-8", "utf8")):
        return InputEncodingError(
            f"input: {names} is not valid UTF-8 ({text})",
            hint="re-save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)",
        )
    bad_line = first_bad_json_line(source.files) if source.format == "jsonl" and "malformed json" in full else None
    if bad_line is not None:  # DuckDB names the line where its parser gave up, often a later one
        return InputError(
            f"input: {bad_line[0].name} line {bad_line[1]:,} is not valid JSON: {bad_line[2]}",
            hint="fix or remove that line: each line of a JSONL file is one JSON object",
        )
    refused = refused_access(exc, "input.sql" if source.sql else "input", source.files[0].parent)
    if refused:
        return refused
    if source.sql and ("Binder Error" in text or "Parser Error" in text or "Catalog Error" in text):
        return InputError(f"input.sql: {text}", hint="the input is available as the table `input`")
    return InputError(f"input: cannot read {names}: {text}", hint="check the file format and contents")


def first_bad_json_line(files: tuple[Path, ...]) -> tuple[Path, int, str] | None:
    """The first line of a JSONL input that is not JSON: (file, line number, why)."""
    for path in files:
        with open(path, "rb") as handle:
            for number, line in enumerate(handle, 1):
                try:
                    line.strip() and json.loads(line)
                except ValueError as exc:
                    return path, number, str(exc)
    return None
