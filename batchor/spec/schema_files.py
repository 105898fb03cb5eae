"""JSON schema files a spec names (an output schema, a tool's parameters): found next to the spec
or in a `schemas/` folder, read as one JSON object, each problem at the spec's `file:line`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from batchor.errors import SchemaError


def find_schema_file(name: str, base: Path) -> Path | None:
    """A schema file next to the spec, in its `schemas/` folder, its parent's, or the working directory's."""
    candidates = [base / name, base / "schemas" / name, base.parent / "schemas" / name, Path.cwd() / "schemas" / name]
    return next((p for p in candidates if p.is_file()), None)


def read_schema_file(name: str, base: Path, where: str, error: type[SchemaError] = SchemaError) -> dict[str, Any]:
    """The JSON object in the schema file `name`; `where` (`file:line: key`) starts each message."""
    path = find_schema_file(name, base)
    if path is None:
        raise error(
            f"{where}: schema file '{name}' not found (looked next to the spec and in a schemas/ folder)",
            hint="give a path relative to the spec file, or put the schema inline",
        )
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise error(f"{where}: cannot read JSON schema {path}: {exc}") from None
    if not isinstance(loaded, dict):
        raise error(f"{where}: {path} must hold a JSON object (a JSON schema)")
    return loaded
