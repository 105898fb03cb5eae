"""`batchor init`: a new folder with a working spec, a schema and sample rows, ready to plan."""

from __future__ import annotations

import json
from pathlib import Path

from batchor.errors import BatchorError
from batchor.spec.json_schema import editor_schema

SPEC = """\
# {modeline}
# Try it offline:  batchor apply {folder}/job.yaml --mock --yes
version: 1
name: {name}
input:
  path: rows.csv
  key: id
model:
  provider: openai
  name: gpt-4.1-mini
  params: {{temperature: 0, max_tokens: 200}}
steps:
  label:
    system: You label short texts.
    prompt: |
      Text: {{{{ row.text }}}}
    output:
      schema: output.schema.json
output:
  path: out/results.csv
limits:
  concurrency: 8
  max_attempts: 4
"""

SCHEMA = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "enum": ["positive", "negative", "neutral"]},
        "reason": {"type": "string", "description": "One short sentence"},
    },
    "required": ["label", "reason"],
    "additionalProperties": False,
}

ROWS = "id,text\n1,I love this product\n2,The delivery was late and the box was damaged\n3,It is a chair\n"


def init_project(folder: Path, name: str | None = None, force: bool = False) -> list[Path]:
    """Write job.yaml, output.schema.json and rows.csv into `folder` (refuses to overwrite), and
    the spec format's schema into the project's `schemas/` for editors (see `editor_schema`)."""
    files = {
        folder / "job.yaml": "",
        folder / "output.schema.json": json.dumps(SCHEMA, indent=2) + "\n",
        folder / "rows.csv": ROWS,
    }
    existing = [p for p in files if p.exists()]
    if existing and not force:
        raise BatchorError(f"{', '.join(str(p) for p in existing)} already exist(s)", hint="use --force to overwrite")
    folder.mkdir(parents=True, exist_ok=True)
    schema_file, schema_text, modeline = editor_schema(editor_project(folder), folder)
    files[folder / "job.yaml"] = SPEC.format(name=name or _name(folder), folder=folder, modeline=modeline)
    files[schema_file] = schema_text  # generated: refreshed to the installed version's
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(files)


def editor_project(spec_dir: Path) -> Path:
    """The project folder whose `schemas/` holds the spec format's schema: the one holding
    `.batchor/` (or the git root) at or above `spec_dir`, else `spec_dir`."""
    from batchor.state.location import project_folder

    return project_folder(spec_dir, "")[0]


def state_marker(folder: Path) -> tuple[Path, bool]:
    """The `.batchor/` folder that marks the new job's project (its state lives there; see
    state/location.py), and whether it was created: an enclosing project's is kept."""
    from batchor.state.location import STATE_DIR, project_folder

    project, why = project_folder(folder, "")
    if why.startswith(STATE_DIR):
        return project / STATE_DIR, False
    marker = folder / STATE_DIR
    marker.mkdir(exist_ok=True)
    return marker, True


def _name(folder: Path) -> str:
    cleaned = "".join(ch if ch.isalnum() or ch in "_.-" else "-" for ch in folder.resolve().name)
    return cleaned.strip("-._") or "job"
