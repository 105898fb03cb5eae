"""Models and model options are checked before any call: a misspelt model or option is a coded
error naming the place and the fix; a model the table lacks is accepted only when the spec says
what it costs (`price:`) or that it is `custom: true`, and the plan never shows it as $0."""

from __future__ import annotations

import json

import pytest
import yaml
from cli_helpers import run_cli, run_inprocess
from conftest import make_spec

from batchor import api
from batchor.engine.batch_collect import KEEP_FILES_OPTION
from batchor.errors import ModelOptionError, SpecProblemsError, UnknownModelError
from batchor.providers.gemini.batch import INLINE_OPTION
from batchor.providers.options import provider_options


def edit_model(spec, step_model=None, **model):
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    data["model"].update(model)
    if step_model is not None:
        data["steps"]["classify"]["model"] = step_model
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return spec


def model_line(spec, key="name"):
    lines = spec.read_text(encoding="utf-8").splitlines()
    start = lines.index("model:")
    return next(i for i, line in enumerate(lines[start:], start + 1) if line.strip().startswith(f"{key}:"))


@pytest.fixture
def cli(monkeypatch, capsys):
    return lambda cwd, *args: run_inprocess(monkeypatch, capsys, cwd, *args)


def test_misspelt_model_fails_validate_and_plan_with_the_closest_names(workdir, cli):
    spec = edit_model(make_spec(workdir, rows=2), name="gpt-4.1-mnii")
    code, out, err = cli(workdir, "validate", "spec.yaml")
    assert code == 1, out + err
    where = f"spec.yaml:{model_line(spec)}: model.name"
    assert f"error [model_unlisted]: {where}: model 'gpt-4.1-mnii' is not one of openai's known models" in err
    assert "did you mean 'gpt-4.1-mini'" in err
    assert "custom: true" in err and "price:" in err
    code, out, err = cli(workdir, "plan", "spec.yaml")
    assert code == 1 and "[model_unlisted]" in err and "$0" not in out + err
    assert not (workdir / ".batchor" / "plans").exists() or not list((workdir / ".batchor" / "plans").iterdir())


def test_step_override_and_command_line_model_are_checked_where_they_are_written(workdir, cli):
    edit_model(make_spec(workdir, rows=2), step_model={"name": "claude-haiku-4-5"})
    code, _, err = cli(workdir, "validate", "spec.yaml")
    assert code == 1
    assert "steps.classify.model.name: model 'claude-haiku-4-5' is not one of openai's known models" in err
    assert "it is a model of anthropic" in err and "provider: anthropic" in err
    make_spec(workdir, rows=2)
    code, _, err = cli(workdir, "validate", "spec.yaml", "--model", "anthropic:claude-hiaku-4-5")
    assert code == 1 and "--model: model 'claude-hiaku-4-5' is not one of anthropic's known models" in err
    assert cli(workdir, "validate", "spec.yaml", "--model", "anthropic:claude-haiku-4-5")[0] == 0


def test_a_mistake_in_the_job_model_is_one_problem_not_one_per_step(workdir):
    spec = make_spec(workdir, rows=2)
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    data["model"]["name"] = "gpt-4o-minii"
    data["steps"]["again"] = {"prompt": "Again: {{ row.text }}"}
    data["steps"]["third"] = {"prompt": "Third: {{ row.text }}", "model": {"options": {"colour": "red"}}}
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with pytest.raises(SpecProblemsError) as raised:
        api.validate(spec)
    codes = sorted(p.code for p in raised.value.problems)
    assert codes == ["model_option", "model_unlisted"]


def test_the_mock_rehearsal_still_checks_the_real_model(workdir, cli):
    edit_model(make_spec(workdir, rows=2), name="gpt-4.1-mnii")
    code, _, err = cli(workdir, "validate", "spec.yaml", "--mock")
    assert code == 1 and "[model_unlisted]" in err


@pytest.mark.parametrize(
    ("provider", "model"),
    [
        ("openai", "gpt-4.1-mini-2025-04-14"),
        ("gemini", "models/gemini-2.5-flash"),
        ("anthropic", "claude-haiku-4-5"),
        ("vllm", "Qwen/Qwen3-8B"),
        ("ollama", "my-own-llama:7b"),
        ("mock", "anything"),
    ],
)
def test_listed_dated_and_self_hosted_models_pass(workdir, provider, model):
    report = api.validate(edit_model(make_spec(workdir, rows=2), provider=provider, name=model))
    assert report.steps == ["classify"]


def test_custom_model_without_price_is_accepted_but_never_priced_as_zero(workdir, cli):
    edit_model(make_spec(workdir, rows=2), name="ft:gpt-4.1-mini:acme::b42", custom=True)
    code, out, err = cli(workdir, "validate", "spec.yaml")
    assert code == 0, err
    assert "no price known for openai:ft:gpt-4.1-mini:acme::b42" in out
    code, out, err = cli(workdir, "plan", "spec.yaml")
    assert code == 0, err
    step_line = next(line for line in out.splitlines() if "step classify" in line)
    assert "cost unknown (no price)" in step_line and "$" not in step_line
    assert "priced steps only" in out and "no price    openai:ft:gpt-4.1-mini:acme::b42" in out
    code, _, err = cli(workdir, "plan", "spec.yaml", "--format", "markdown")
    code, _, err = cli(workdir, "apply", "spec.yaml", "--max-cost", "1")
    assert code == 4 and "[no_price]" in err


def test_openai_compatible_needs_a_price_or_custom(workdir, cli):
    spec = edit_model(
        make_spec(workdir, rows=2), provider="openai-compatible", name="house-model", base_url="http://127.0.0.1:9/v1"
    )
    code, _, err = cli(workdir, "validate", "spec.yaml")
    assert code == 1 and "[model_unlisted]" in err and "openai-compatible endpoint" in err
    edit_model(spec, price={"input_per_mtok": 0, "output_per_mtok": 0})
    code, out, err = cli(workdir, "plan", "spec.yaml", "--max-cost", "0")
    assert code == 0, err
    assert "within budget" in out and "no price" not in out


@pytest.mark.parametrize(
    ("provider", "options", "expected"),
    [
        (
            "gemini",
            {"api_verison": "v1beta"},
            "model.options.api_verison: provider 'gemini' has no option 'api_verison' (did you mean 'api_version'?)",
        ),
        ("openai", {"vertexai": True}, "model.options.vertexai: provider 'openai' has no option 'vertexai'"),
        ("anthropic", {"structured": "tools"}, "model.options.structured: 'tools' is not one of output_config, tool"),
        (
            "gemini",
            {"batch_inline_max_bytes": "big"},
            "model.options.batch_inline_max_bytes: 'big' must be a whole number >= 1",
        ),
        ("gemini", {"vertexai": "yes"}, "model.options.vertexai: 'yes' must be true or false"),
        ("vllm", {"api_version": "v1"}, "model.options.api_version: provider 'vllm' has no option 'api_version'"),
    ],
)
def test_unknown_or_wrong_options_are_errors_listing_the_known_ones(workdir, cli, provider, options, expected):
    model = "gemini-2.5-flash" if provider == "gemini" else "claude-haiku-4-5" if provider == "anthropic" else "x"
    model = "gpt-4.1-mini" if provider == "openai" else model
    spec = edit_model(make_spec(workdir, rows=2), provider=provider, name=model, options=options)
    code, _, err = cli(workdir, "validate", "spec.yaml")
    assert code == 1, err
    assert f"error [model_option]: spec.yaml:{model_line(spec, 'options')}: {expected}" in err
    if "has no option" in expected:  # the fix lists what the provider reads
        known = [o.name for o in provider_options(provider)]
        assert all(f"`{name}`" in err for name in known) if known else "takes none" in err


def test_known_options_pass_and_match_what_the_adapters_read(workdir):
    gemini = {o.name for o in provider_options("gemini")}
    assert {
        INLINE_OPTION,
        KEEP_FILES_OPTION,
        "api_version",
        "vertexai",
        "project",
        "location",
        "batch_gcs",
        "transport",
    } == gemini
    assert KEEP_FILES_OPTION in {o.name for o in provider_options("openai")}
    spec = edit_model(
        make_spec(workdir, rows=2),
        provider="gemini",
        name="gemini-2.5-flash",
        options={
            "api_version": "v1beta",
            "batch_inline_max_bytes": 1024,
            "keep_provider_files": True,
            "transport": "sdk",
        },
    )
    api.validate(spec)
    edit_model(spec, provider="anthropic", name="claude-haiku-4-5", options={"structured": "tool"})
    api.validate(spec)


def test_switching_provider_drops_the_other_providers_options(workdir):
    spec = edit_model(
        make_spec(workdir, rows=2), provider="gemini", name="gemini-2.5-flash", options={"api_version": "v1beta"}
    )
    assert api.validate(spec, model="openai:gpt-4.1-mini").steps == ["classify"]


def test_errors_are_raised_as_coded_exceptions(workdir):
    spec = edit_model(make_spec(workdir, rows=2), name="gpt-4.1-mnii")
    with pytest.raises(UnknownModelError):
        api.plan(spec, save=False)
    edit_model(spec, name="gpt-4.1-mini", options={"nope": 1})
    with pytest.raises(ModelOptionError):
        api.plan(spec, save=False)


def test_validate_subprocess_reports_a_misspelt_model(workdir):
    edit_model(make_spec(workdir, rows=2), name="gpt-4.1-mnii")
    result = run_cli(workdir, "validate", "spec.yaml", "--json")
    assert result.returncode == 1
    problems = json.loads(result.stdout)[0]["problems"]
    assert [p["code"] for p in problems] == ["model_unlisted"] and "gpt-4.1-mini" in problems[0]["message"]
