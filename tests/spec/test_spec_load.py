"""Spec loading: strict YAML, key paths with file:line, env expansion, templates and schemas
checked before any provider call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import make_spec

from batchor import api
from batchor.errors import (
    EnvVarMissingError,
    SchemaError,
    SpecError,
    TemplateError,
    TemplateUndefinedError,
)
from batchor.spec.load import load_spec


def edit(spec: Path, old: str, new: str) -> Path:
    text = spec.read_text(encoding="utf-8")
    assert old in text
    spec.write_text(text.replace(old, new, 1), encoding="utf-8")
    return spec


def line_of(spec: Path, needle: str) -> int:
    for number, line in enumerate(spec.read_text(encoding="utf-8").splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {spec}")


def test_duplicate_key_is_rejected_with_file_and_both_lines(workdir):
    spec = edit(make_spec(workdir), "  concurrency: 8\n", "  concurrency: 8\n  concurrency: 2\n")
    with pytest.raises(SpecError) as info:
        load_spec(spec)
    first = line_of(spec, "concurrency: 8")
    assert f"{spec}:{first + 1}: duplicate key 'concurrency'" in info.value.message
    assert f"first defined on line {first}" in info.value.message


def test_duplicate_step_name_is_rejected(workdir):
    spec = make_spec(workdir)
    text = spec.read_text(encoding="utf-8")
    steps = text[text.index("steps:\n") + len("steps:\n") : text.index("\noutput:\n") + 1]
    spec.write_text(text.replace(steps, steps + steps), encoding="utf-8")
    with pytest.raises(SpecError, match="duplicate key 'classify'"):
        load_spec(spec)


def test_unknown_key_names_key_path_and_line(workdir):
    spec = edit(make_spec(workdir), "  concurrency: 8\n", "  concurrency: 8\n  concurency: 3\n")
    with pytest.raises(SpecError) as info:
        load_spec(spec)
    assert info.value.code == "spec_invalid"
    line = line_of(spec, "concurency: 3")
    assert f"{spec}:{line}: limits.concurency: unknown key" in info.value.message


def test_unknown_key_inside_a_step(workdir):
    spec = edit(make_spec(workdir), "    system: Classify.\n", "    system: Classify.\n    promt: hi\n")
    with pytest.raises(SpecError) as info:
        load_spec(spec)
    assert f"{spec}:{line_of(spec, 'promt: hi')}: steps.classify.promt: unknown key" in info.value.message
    assert "SqlStep" not in info.value.message  # one clear problem, not one per step kind


@pytest.mark.parametrize(
    ("old", "new", "path"),
    [
        ("  concurrency: 8\n", "  concurrency: many\n", "limits.concurrency"),
        ("  concurrency: 8\n", "  concurrency: 0\n", "limits.concurrency"),
        ("  max_attempts: 3\n", "  max_attempts: [3]\n", "limits.max_attempts"),
        ("  key: id\n", "  key: {column: id}\n", "input.key"),
        ("version: 1\n", "version: 2\n", "version"),
    ],
)
def test_wrong_types_are_spec_invalid(workdir, old, new, path):
    spec = edit(make_spec(workdir), old, new)
    with pytest.raises(SpecError) as info:
        load_spec(spec)
    assert info.value.code == "spec_invalid"
    assert f"{spec}:{line_of(spec, new.strip())}: {path}:" in info.value.message


def test_missing_required_key_is_named(workdir):
    spec = make_spec(workdir)
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    del data["input"]
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with pytest.raises(SpecError, match=r"spec.yaml:1: input: required key is missing"):
        load_spec(spec)


def test_env_vars_are_expanded_with_defaults(workdir, monkeypatch):
    monkeypatch.setenv("BATCHOR_T_MODEL", "gpt-4.1-nano")
    monkeypatch.delenv("BATCHOR_T_UNSET", raising=False)
    spec = edit(make_spec(workdir), "name: gpt-4.1-mini", "name: ${BATCHOR_T_MODEL}")
    edit(spec, "path: out/results.csv", "path: ${BATCHOR_T_UNSET:-out/default.csv}")
    edit(spec, "system: Classify.", "system: costs $$5 ${BATCHOR_T_MODEL}")
    loaded = load_spec(spec)
    assert loaded.spec.model.name == "gpt-4.1-nano"
    assert loaded.spec.output.path == "out/default.csv"
    assert loaded.spec.steps["classify"].system == "costs $5 gpt-4.1-nano"


def test_missing_env_var_is_env_missing_with_line(workdir, monkeypatch):
    monkeypatch.delenv("BATCHOR_T_UNSET", raising=False)
    spec = edit(make_spec(workdir), "name: gpt-4.1-mini", "name: ${BATCHOR_T_UNSET}")
    with pytest.raises(EnvVarMissingError) as info:
        load_spec(spec)
    assert info.value.code == "env_missing"
    assert f"{spec}:{line_of(spec, 'BATCHOR_T_UNSET')}" in info.value.message
    assert "BATCHOR_T_UNSET" in info.value.message


@pytest.mark.parametrize("value", ["NO", "no", "off", "yes", "012", "0x1F", "1e3", "~"])
def test_yaml_11_scalars_never_become_silent_values_in_string_fields(workdir, value):
    spec = edit(make_spec(workdir), "name: small\n", f"name: small\ndescription: {value}\n")
    try:
        loaded = load_spec(spec)
    except SpecError as exc:
        assert f"{spec}:{line_of(spec, 'description:')}: description:" in exc.message
        return
    if value != "~":  # `~` is YAML's null: "no description" is the honest reading
        assert loaded.spec.description == value


@pytest.mark.parametrize("value", ["NO", "012"])
def test_quoted_yaml_11_scalars_are_kept_as_written(workdir, value):
    spec = edit(make_spec(workdir), "name: small\n", f"name: small\ndescription: '{value}'\n")
    assert load_spec(spec).spec.description == value


def test_template_syntax_error(workdir):
    spec = edit(make_spec(workdir), "{{ row.text }}", "{{ row.text ")
    with pytest.raises(TemplateError) as info:
        api.validate(spec)
    assert info.value.code == "template_syntax"
    assert "steps.classify.prompt" in info.value.message


def test_template_with_unknown_variable(workdir):
    spec = edit(make_spec(workdir), "{{ row.text }}", "{{ text }}")
    with pytest.raises(TemplateUndefinedError, match="steps.classify.prompt: template uses 'text'"):
        api.validate(spec)


def test_template_with_missing_column_fails_before_any_call(workdir, fake):
    spec = edit(make_spec(workdir), "{{ row.text }}", "{{ row.txet }}")
    with pytest.raises(TemplateUndefinedError) as info:
        api.apply(spec, handle_signals=False)
    assert info.value.code == "template_undefined"
    assert "txet" in info.value.message and "columns: id, text" in info.value.message
    assert fake.stats()["requests"] == 0
    assert not (workdir / "out" / "results.csv").exists()


@pytest.mark.parametrize("name", ["bad-name", "row", "1st", "has space"])
def test_invalid_step_names(workdir, name):
    spec = edit(make_spec(workdir), "  classify:\n", f"  '{name}':\n")
    with pytest.raises(SpecError) as info:
        load_spec(spec)
    assert info.value.code == "spec_invalid"
    assert f"step name '{name}'" in info.value.message
    assert f"{spec}:{line_of(spec, 'steps:')}: steps" in info.value.message


def test_step_depending_on_unknown_step(workdir):
    spec = edit(
        make_spec(workdir),
        "    system: Classify.\n",
        "    system: Classify.\n    depends_on: [nothere]\n",
    )
    with pytest.raises(SpecError, match="depends on unknown step 'nothere'"):
        load_spec(spec)


def test_schema_file_missing(workdir):
    spec = make_spec(
        workdir,
        schema=None,
        steps={"classify": {"prompt": "{{ row.text }}", "output": {"schema": "nope.schema.json"}}},
    )
    with pytest.raises(SchemaError) as info:
        load_spec(spec)
    assert info.value.code == "schema_invalid"
    assert "nope.schema.json" in info.value.message and "not found" in info.value.message
    assert f"{spec}:{line_of(spec, 'nope.schema.json')}" in info.value.message


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "objekt"},
        {"type": "object", "properties": {"a": {"type": "strin"}}},
        {"type": "object", "required": "a"},
    ],
)
def test_invalid_json_schema(workdir, schema):
    (workdir / "bad.schema.json").write_text(json.dumps(schema), encoding="utf-8")
    spec = make_spec(
        workdir,
        steps={"classify": {"prompt": "{{ row.text }}", "output": {"schema": "bad.schema.json"}}},
    )
    with pytest.raises(SchemaError) as info:
        api.validate(spec)
    assert info.value.code == "schema_invalid"
    assert "steps.classify.output.schema" in info.value.message


def test_schema_file_that_is_not_json(workdir):
    (workdir / "bad.schema.json").write_text('{"type": ', encoding="utf-8")
    spec = make_spec(
        workdir,
        steps={"classify": {"prompt": "{{ row.text }}", "output": {"schema": "bad.schema.json"}}},
    )
    with pytest.raises(SchemaError, match="cannot read JSON schema"):
        load_spec(spec)


def test_malformed_yaml_names_the_line(workdir):
    spec = edit(make_spec(workdir), "  concurrency: 8\n", "  concurrency: [8\n")
    with pytest.raises(SpecError) as info:
        load_spec(spec)
    assert info.value.code == "spec_yaml"
    assert f"{spec}:" in info.value.message and "malformed YAML" in info.value.message
