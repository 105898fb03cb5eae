"""Which input a spec names: its files (a path, a glob or a remote URL fetched once), their
format, and the query and key columns the reader applies (spec/inputs.py reads them). Kept apart
from the reader so resolving an input needs no DuckDB connection.
"""

from __future__ import annotations

import glob as globlib
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from batchor.errors import InputError, InputMissingError
from batchor.spec.remote import fetch, is_remote

_EXTENSIONS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".xlsx": "xlsx",
}


@dataclass(frozen=True)
class InputSource:
    """A resolved input: concrete files, format, query and key columns."""

    files: tuple[Path, ...]
    format: str
    sql: str | None
    limit: int | None
    key_columns: tuple[str, ...]
    sample: int | None = None
    seed: int = 0
    remote: tuple[str, ...] = ()  # url#version of a remote input (spec/remote.py)

    def fingerprint(self) -> str:
        """Content hash of the files plus the query: a changed input makes a saved plan stale."""
        digest = hashlib.sha256()
        for path in self.files:
            digest.update(path.name.encode() + b"\0")
            with open(path, "rb") as handle:
                while chunk := handle.read(1 << 20):
                    digest.update(chunk)
        digest.update(f"\0{self.format}\0{self.sql}\0{self.limit}\0{self.key_columns}".encode())
        if self.sample:
            digest.update(f"\0sample={self.sample}:{self.seed}".encode())
        for pinned in self.remote:
            digest.update(f"\0remote={pinned}".encode())
        return digest.hexdigest()


def input_source(loaded: Any) -> InputSource:
    """The InputSource a loaded spec describes."""
    spec = loaded.spec.input
    source = resolve_input(spec.path, loaded.base_dir, spec.format, spec.sql, spec.limit, spec.key_columns())
    return InputSource(
        source.files, source.format, source.sql, source.limit, source.key_columns, spec.sample, spec.seed, source.remote
    )


def resolve_input(
    pattern: str, base_dir: Path, fmt: str | None, sql: str | None, limit: int | None, key_columns: list[str]
) -> InputSource:
    remote: tuple[str, ...] = ()
    files: tuple[Path, ...]
    path = Path(pattern).expanduser()
    full = path if path.is_absolute() else base_dir / path
    if is_remote(pattern):
        found = fetch(pattern, base_dir)
        files, remote = (found.local,), (found.pinned,)
    elif any(ch in pattern for ch in "*?["):
        files = tuple(sorted(Path(p) for p in globlib.glob(str(full), recursive=True) if Path(p).is_file()))
        if not files:
            raise InputMissingError(
                f"input: no files match '{pattern}' (looked in {base_dir})",
                hint="check the glob; paths are relative to the spec file",
            )
    else:
        if not full.exists():
            raise InputMissingError(
                f"input: file not found: {full}", hint="check input.path; it is relative to the spec file"
            )
        if full.is_dir():
            raise InputError(f"input: {full} is a directory", hint="point input.path at a file or a glob")
        files = (full,)
    fmt = fmt or _EXTENSIONS.get(files[0].suffix.lower())
    if fmt is None:
        raise InputError(
            f"input: cannot tell the format of {files[0].name}",
            hint="set input.format: csv | tsv | jsonl | parquet | xlsx",
        )
    return InputSource(files, fmt, sql, limit, tuple(key_columns), remote=remote)
