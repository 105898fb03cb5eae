"""The spec format's own JSON Schema, generated from the pydantic models.

Committed as schemas/batchor-spec.schema.json for editor autocomplete; a test fails when the
committed file drifts from the models (regenerate with `batchor spec-schema --write`). `init` and
`draft` write the same file into the user's project and point the spec's modeline at it by a
relative path, so an editor resolves it offline (nothing has to be published anywhere).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from batchor.spec.model import JobSpec
from batchor.version import __version__

SCHEMA_FILE = Path("schemas") / "batchor-spec.schema.json"  # also where init/draft put it in a project
# Where this version's schema is served once its tag is published (the source repository).
SCHEMA_ID = f"https://raw.githubusercontent.com/batchor-dev/batchor/v{__version__}/{SCHEMA_FILE.as_posix()}"


def spec_json_schema() -> dict[str, Any]:
    schema = JobSpec.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_ID
    schema["title"] = "batchor job spec (version 1)"
    return schema


def spec_json_schema_text() -> str:
    return json.dumps(spec_json_schema(), indent=2, sort_keys=True) + "\n"


def editor_schema(project: Path, spec_dir: Path) -> tuple[Path, str, str]:
    """(file, text, modeline) that give editors the spec format offline: the schema file in the
    project's `schemas/` folder, and the yaml-language-server comment for a spec in `spec_dir`
    that names it by a path relative to the spec (how the committed specs do it)."""
    relative = Path(os.path.relpath((project / SCHEMA_FILE).resolve(), spec_dir.resolve()))
    target = Path(os.path.normpath(spec_dir / relative))  # as relative as the caller's spec_dir
    return target, spec_json_schema_text(), f"yaml-language-server: $schema={relative.as_posix()}"
