"""The spec format's own JSON Schema, generated from the pydantic models.

Committed as schemas/batchor-spec.schema.json for editor autocomplete; a test fails when the
committed file drifts from the models (regenerate with `batchor spec-schema --write`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from batchor.spec.model import JobSpec

SCHEMA_FILE = Path("schemas") / "batchor-spec.schema.json"


def spec_json_schema() -> dict[str, Any]:
    schema = JobSpec.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://batchor.dev/schemas/batchor-spec.schema.json"
    schema["title"] = "batchor job spec (version 1)"
    return schema


def spec_json_schema_text() -> str:
    return json.dumps(spec_json_schema(), indent=2, sort_keys=True) + "\n"
