"""The committed JSON Schema of the spec format: generated from the models, never drifting, and
accepting every committed spec."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from batchor.spec.json_schema import spec_json_schema_text

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_PATH = ROOT / "schemas" / "batchor-spec.schema.json"
SPECS = sorted((ROOT / "specs").glob("*.yaml"))


def test_committed_schema_matches_the_models():
    assert SCHEMA_PATH.is_file(), "generate it: batchor spec-schema --write"
    assert SCHEMA_PATH.read_text(encoding="utf-8") == spec_json_schema_text(), (
        "schemas/batchor-spec.schema.json is out of date: run `batchor spec-schema --write`"
    )


def test_committed_schema_is_a_valid_json_schema():
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)


def test_there_are_committed_specs():
    assert SPECS, "specs/*.yaml is empty"


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.name)
def test_committed_spec_validates_against_the_schema(spec):
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(data)


def test_schema_rejects_an_unknown_key():
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    data = yaml.safe_load(SPECS[0].read_text(encoding="utf-8"))
    data["limits"] = {**data.get("limits", {}), "concurency": 3}
    with pytest.raises(jsonschema.ValidationError, match="concurency"):
        jsonschema.Draft202012Validator(schema).validate(data)
