"""A draft as files: the spec's YAML text, where its input and schema point, and writing them
only when nothing the user has would be overwritten (unless asked to)."""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any

import yaml

from batchor.draft.template import SCHEMA_FILE
from batchor.errors import OutputExistsError


def schema_path_for(spec_path: Path, job: Any = None) -> Path:
    """The output schema's file beside the spec: `triage.output.schema.json` (`spec.schema.json`
    read as the schema of the spec format). Named after the spec file when `-o` gave it a name of its
    own (two drafts in one folder must not share a schema), else after the job."""
    named_job = isinstance(job, str) and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", job)
    name = job if named_job and spec_path.stem == "spec" else spec_path.stem
    return spec_path.with_name(f"{name}.output.schema.json")


def refuse_existing(paths: list[Path], force: bool) -> None:
    existing = [str(p) for p in paths if p.exists()]
    if existing and not force:
        raise OutputExistsError(
            f"{', '.join(existing)} already exist(s); draft writes new files only",
            hint="choose another file with -o, or pass --force to overwrite",
        )


def placed(spec: dict[str, Any], data_path: str, schema_name: str) -> dict[str, Any]:
    """The drafted spec with its input on the data file and its schema on the schema file
    (a draft names neither: the drafter does not know where the files go)."""
    spec = copy.deepcopy(spec) if isinstance(spec, dict) else {}
    spec.pop("state", None)  # where the state lives is the project's business, not the draft's
    given = spec.get("input")
    spec["input"] = {**(given if isinstance(given, dict) else {}), "path": data_path}
    steps = spec.get("steps")
    for step in steps.values() if isinstance(steps, dict) else []:
        output = step.get("output") if isinstance(step, dict) else None
        if isinstance(output, dict) and isinstance(output.get("schema"), str):
            output["schema"] = schema_name
    return spec


def uses_schema_file(spec: dict[str, Any], schema_name: str) -> bool:
    steps = spec.get("steps")
    return any(
        isinstance(s, dict) and isinstance(s.get("output"), dict) and s["output"].get("schema") == schema_name
        for s in (steps.values() if isinstance(steps, dict) else [])
    )


class _Dumper(yaml.SafeDumper):
    """Multi-line prompts as `|` blocks, so the YAML reads like a hand-written spec."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value and not any(line != line.rstrip() for line in value.splitlines()) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def spec_yaml(spec: dict[str, Any], header: list[str]) -> str:
    comments = "".join(f"# {line}\n" for line in header)
    return comments + yaml.dump(spec, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


def schema_json(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def write_files(files: dict[Path, str]) -> None:
    """Each file written whole (a temp file renamed), so an interruption leaves no half file."""
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{path.name}.draft-tmp")
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, path)


def relative_data_path(data: Path, spec_dir: Path) -> str:
    """The data file as the spec will name it: relative to the spec's folder when it can be."""
    data, spec_dir = data.resolve(), spec_dir.resolve()
    try:
        shared = Path(os.path.commonpath([data, spec_dir]))
    except ValueError:  # another drive (Windows)
        return str(data)
    return os.path.relpath(data, spec_dir) if shared != Path(shared.anchor) else str(data)


__all__ = [
    "SCHEMA_FILE",
    "placed",
    "refuse_existing",
    "relative_data_path",
    "schema_json",
    "schema_path_for",
    "spec_yaml",
    "uses_schema_file",
    "write_files",
]
