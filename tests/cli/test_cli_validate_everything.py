"""`validate` runs every check `plan` and `apply` would run, offline, and reports every
independent mistake in one pass, each at its `file:line` with a fix (issue 35)."""

from __future__ import annotations

import json

import yaml
from conftest import make_spec


def _edit(spec, edit) -> None:
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    edit(data)
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def _line_of(spec, needle: str) -> int:
    return next(i for i, line in enumerate(spec.read_text(encoding="utf-8").splitlines(), 1) if needle in line)


def _four_mistakes(data) -> None:
    data["model"]["name"] = "gpt-4.1-mimi"
    data["model"]["params"] = {"temprature": 0}
    data["steps"]["classify"]["output"]["schema"]["properties"]["score"]["type"] = "int"
    data["steps"]["classify"]["prompt"] = "Review: {{ row.txt }}"


def test_independent_mistakes_all_come_out_of_one_run(workdir, batchor_cli):
    """A model typo, a parameter typo, a schema type `int` and a column typo: four errors, not
    four rounds (before, the column typo waited behind the model and the schema, and the
    parameter was sent to the provider)."""
    spec = make_spec(workdir, rows=2)
    _edit(spec, _four_mistakes)
    result = batchor_cli(workdir, "validate", spec)
    assert result.returncode == 1, result.stderr
    err = result.stderr
    assert f"FAIL {spec}: 4 problem(s)" in err
    assert f"[model_unlisted]: {spec}:{_line_of(spec, 'gpt-4.1-mimi')}: model.name" in err
    assert f"[model_param]: {spec}:{_line_of(spec, 'temprature')}: model.params.temprature" in err
    assert "did you mean 'temperature'?" in err and "fix: rename it to `temperature`" in err
    assert f"[schema_invalid]: {spec}:{_line_of(spec, 'type: int')}: steps.classify.output.schema" in err
    assert "did you mean `type: integer`?" in err
    assert f"[template_undefined]: {spec}:{_line_of(spec, 'row.txt')}: steps.classify.prompt: `row.txt`" in err

    listed = batchor_cli(workdir, "validate", spec, "--json")
    assert listed.returncode == 1
    (report,) = json.loads(listed.stdout)
    codes = sorted(p["code"] for p in report["problems"])
    assert codes == ["model_param", "model_unlisted", "schema_invalid", "template_undefined"]
    assert all(p["message"].startswith(f"{spec}:") and p.get("hint") for p in report["problems"])


def _check(spec, check: dict) -> None:
    _edit(spec, lambda data: data["steps"]["classify"].update(checks=[check]))


def test_a_check_naming_a_missing_field_fails_validate_and_plan_before_apply(workdir, batchor_cli):
    """`length(classify.sentment) > 0` passed validate and plan; only apply refused it."""
    spec = make_spec(workdir, rows=2)
    _check(spec, {"name": "long enough", "sql": "length(classify.sentment) > 0"})
    line = _line_of(spec, "name: long enough")
    for command in (["validate", spec], ["plan", spec, "--mock"]):
        result = batchor_cli(workdir, *command)
        assert result.returncode == 1, (command, result.stdout, result.stderr)
        assert "[spec_invalid]" in result.stderr and "check 'long enough'" in result.stderr, result.stderr
        assert "(did you mean `classify.sentiment`?)" in result.stderr
    assert f"{spec}:{line}: steps.classify.checks" in batchor_cli(workdir, "validate", spec).stderr
    assert not list((workdir / ".batchor" / "plans").glob("*.plan")) if (workdir / ".batchor").exists() else True


def test_every_kind_of_check_binds_at_validate(workdir, batchor_cli):
    """Row (Jinja), SQL, distribution, aggregate and metric checks that fit the answers pass;
    a Jinja check naming no step and an aggregate over a missing column do not."""
    spec = make_spec(workdir, rows=2)
    good = [
        {"row": "classify.score >= 1"},
        {"sql": "classify.score BETWEEN 1 AND 5 AND length(row_text) > 0".replace("row_text", "text")},
        {"distribution": "classify.sentiment", "max_share": 0.9},
        {"aggregate": "avg(classify.score)", "min": 1},
    ]
    _edit(spec, lambda data: data["steps"]["classify"].update(checks=good))
    assert batchor_cli(workdir, "validate", spec).returncode == 0

    bad = [{"row": "clasify.score >= 1"}, {"aggregate": "avg(classify.scor)", "min": 1}]
    _edit(spec, lambda data: data["steps"]["classify"].update(checks=bad))
    result = batchor_cli(workdir, "validate", spec)
    assert result.returncode == 1
    assert f"FAIL {spec}: 2 problem(s)" in result.stderr
    assert "uses clasify, which is neither `row` nor a step" in result.stderr
    assert "(did you mean `classify.score`?)" in result.stderr


def test_a_golden_label_column_that_is_missing_fails_validate(workdir, batchor_cli):
    spec = make_spec(workdir, rows=2)
    _edit(spec, lambda data: data["steps"]["classify"].update(expected={"sentiment": "label"}))
    result = batchor_cli(workdir, "validate", spec)
    assert result.returncode == 1
    assert "steps.classify.expected.sentiment: input column 'label' not found" in result.stderr


def test_params_are_checked_against_each_provider(workdir, batchor_cli):
    """Each provider's own names pass; a misspelt one is refused with the close name; an
    OpenAI-compatible server's own parameters pass, a near miss of a known one does not."""
    spec = make_spec(workdir, rows=2)
    cases = [
        ("anthropic", "claude-haiku-4-5", {"top_k": 5, "stop_sequences": ["x"], "stop": "y"}, None),
        ("gemini", "gemini-2.5-flash", {"thinking_config": {"thinking_budget": 0}, "max_tokens": 5}, None),
        ("openai", "gpt-4.1-mini", {"reasoning_effort": "low", "seed": 1}, None),
        ("vllm", "qwen", {"min_p": 0.1, "repetition_penalty": 1.1}, None),
        ("anthropic", "claude-haiku-4-5", {"top_kk": 5}, "anthropic has no parameter 'top_kk' (did you mean 'top_k'?)"),
        ("gemini", "gemini-2.5-flash", {"thinking": 1}, "gemini has no parameter 'thinking'"),
        ("vllm", "qwen", {"temprature": 0}, "vllm has no parameter 'temprature' (did you mean 'temperature'?)"),
        ("vllm", "qwen", {"top_k": 5}, None),  # another provider's name is no typo on a compatible server
        ("openai", "gpt-4.1-mini", {"top_k": 5}, "openai has no parameter 'top_k'"),  # OpenAI refuses it
    ]
    for provider, model, params, expected in cases:
        block = {"provider": provider, "name": model, "params": params, "custom": True}
        _edit(spec, lambda data, block=block: data["model"].update(block))
        result = batchor_cli(workdir, "validate", spec)
        if expected is None:
            assert result.returncode == 0, (provider, params, result.stderr)
        else:
            assert result.returncode == 1 and "[model_param]" in result.stderr, (provider, params, result.stderr)
            assert expected in result.stderr


def test_a_step_params_typo_is_reported_at_the_step(workdir, batchor_cli):
    spec = make_spec(workdir, rows=2)
    _edit(spec, lambda data: data["steps"]["classify"].update(model={"params": {"max_token": 20}}))
    result = batchor_cli(workdir, "validate", spec)
    assert result.returncode == 1
    assert f"{spec}:{_line_of(spec, 'max_token:')}: steps.classify.model.params.max_token" in result.stderr
