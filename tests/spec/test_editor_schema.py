"""Editors get the spec format offline: `init` (and `draft`, tests/cli/test_cli_draft.py) write the
spec format's schema into the project and a modeline that names it by a relative path, and the
schema's `$id` claims no host nobody publishes."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import jsonschema
import yaml

from batchor.scaffold import init_project
from batchor.spec.json_schema import SCHEMA_ID, spec_json_schema, spec_json_schema_text

MODELINE = re.compile(r"^# yaml-language-server: \$schema=(\S+)$", re.MULTILINE)


def resolved_schema(spec: Path) -> Path:
    """The file the spec's modeline names, resolved as yaml-language-server does (from the spec's folder)."""
    found = MODELINE.search(spec.read_text(encoding="utf-8"))
    assert found, f"{spec} has no yaml-language-server modeline"
    assert "://" not in found.group(1), "the modeline must resolve offline"
    return (spec.parent / found.group(1)).resolve()


def test_init_writes_the_schema_its_modeline_names_and_the_spec_validates_against_it(tmp_path):
    created = init_project(tmp_path / "job")
    schema_file = resolved_schema(tmp_path / "job" / "job.yaml")
    assert schema_file == (tmp_path / "job" / "schemas" / "batchor-spec.schema.json").resolve()
    assert schema_file in [p.resolve() for p in created]
    assert schema_file.read_text(encoding="utf-8") == spec_json_schema_text()
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(yaml.safe_load((tmp_path / "job" / "job.yaml").read_text()))


def test_inside_a_git_repository_the_schema_goes_to_its_root(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    init_project(tmp_path / "jobs" / "tickets")
    assert "$schema=../../schemas/batchor-spec.schema.json" in (tmp_path / "jobs" / "tickets" / "job.yaml").read_text()
    assert resolved_schema(tmp_path / "jobs" / "tickets" / "job.yaml").is_file()


def test_the_schema_id_names_the_source_repository_not_an_unpublished_host():
    assert spec_json_schema()["$id"] == SCHEMA_ID
    assert SCHEMA_ID.startswith("https://raw.githubusercontent.com/batchor-dev/batchor/v")
    assert "batchor.dev" not in spec_json_schema_text()
