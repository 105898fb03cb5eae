"""`batchor keys` / `api.required_keys`: the key variables a spec's steps need, resolved as the plan
resolves each step's model (job block, step override, `api_key_env`), and whether each is set."""

from __future__ import annotations

import json

import pytest
import yaml

from batchor import api
from batchor.errors import NoApiKeyError
from tests.conftest import make_spec

STEP = {"prompt": "Review: {{ row.text }}", "output": "text"}


def with_model(folder, **block):
    """A small spec whose job-level model block is `block` (params kept)."""
    spec = make_spec(folder)
    data = yaml.safe_load(spec.read_text())
    data["model"] = {"params": data["model"]["params"], **block}
    spec.write_text(yaml.safe_dump(data), encoding="utf-8")
    return spec


def needs(spec, **environ):
    return [(n.provider, n.envs, n.steps, n.set_as) for n in api.required_keys([spec], environ=environ)]


def test_the_job_model_and_a_step_override_each_need_their_providers_key(workdir):
    steps = {
        "classify": STEP,
        "reply": {**STEP, "model": {"provider": "anthropic", "name": "claude-haiku-4-5"}},
        "again": STEP,
    }
    spec = make_spec(workdir, steps=steps)
    assert needs(spec, OPENAI_API_KEY="sk-x") == [
        ("openai", ("OPENAI_API_KEY",), ("classify", "again"), "OPENAI_API_KEY"),
        ("anthropic", ("ANTHROPIC_API_KEY",), ("reply",), None),
    ]


def test_a_spec_naming_its_own_variable_needs_that_one(workdir):
    spec = with_model(
        workdir, provider="openai", name="gpt-4.1-mini", api_key_env="TEAM_OPENAI_KEY", allow_key_env=True
    )
    assert needs(spec, OPENAI_API_KEY="sk-x") == [("openai", ("TEAM_OPENAI_KEY",), ("classify",), None)]


def test_gemini_takes_either_variable_and_vertex_ai_needs_none(workdir):
    spec = with_model(workdir, provider="gemini", name="gemini-2.5-flash")
    assert needs(spec, GOOGLE_API_KEY="g") == [
        ("gemini", ("GEMINI_API_KEY", "GOOGLE_API_KEY"), ("classify",), "GOOGLE_API_KEY")
    ]
    vertex = with_model(workdir, provider="gemini", name="gemini-2.5-flash", options={"vertexai": True, "project": "p"})
    assert needs(vertex) == []  # Application Default Credentials


@pytest.mark.parametrize("provider", ["mock", "ollama"])
def test_a_provider_without_a_key_needs_none(workdir, provider):
    spec = with_model(workdir, provider=provider, name="any-model", custom=True)
    assert needs(spec) == []


def test_missing_keys_names_each_variable_and_the_steps_that_need_it(workdir):
    spec = with_model(workdir, provider="gemini", name="gemini-2.5-flash")
    with pytest.raises(NoApiKeyError, match=r"GEMINI_API_KEY or GOOGLE_API_KEY \(gemini, for .*spec.yaml: classify\)"):
        api.missing_keys(api.required_keys([spec], environ={}))
    api.missing_keys(api.required_keys([spec], environ={"GEMINI_API_KEY": "k"}))  # all set: no error


def test_the_command_lists_them_and_check_fails_before_any_call(workdir, batchor_cli):
    spec = make_spec(workdir)
    env = {"OPENAI_API_KEY": None}
    done = batchor_cli(workdir, "keys", spec, "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        {
            "spec": str(spec),
            "provider": "openai",
            "env": ["OPENAI_API_KEY"],
            "steps": ["classify"],
            "set": False,
            "set_as": None,
        }
    ]
    done = batchor_cli(workdir, "keys", spec, "--check", env=env)
    assert done.returncode == 1 and "error [no_api_key]: 1 API key(s) not set: OPENAI_API_KEY" in done.stderr
    assert "MISSING" in done.stdout
    done = batchor_cli(workdir, "keys", spec, "--check", env={"OPENAI_API_KEY": "sk-test"})
    assert done.returncode == 0 and "set (OPENAI_API_KEY)" in done.stdout and "sk-test" not in done.stdout


def test_fallback_and_escalation_models_need_their_keys_too(workdir):
    """A run may need any of them: `keys --check` in CI names them before the paid run, as apply does."""
    step = {**STEP, "escalate": {"to": "gemini:gemini-2.5-flash", "when": "classify | length > 100"}}
    spec = make_spec(workdir, steps={"classify": step})
    data = yaml.safe_load(spec.read_text())
    data["model"]["fallback"] = ["anthropic:claude-haiku-4-5"]
    spec.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert needs(spec, OPENAI_API_KEY="sk-x") == [
        ("openai", ("OPENAI_API_KEY",), ("classify",), "OPENAI_API_KEY"),
        ("anthropic", ("ANTHROPIC_API_KEY",), ("classify (fallback)",), None),
        ("gemini", ("GEMINI_API_KEY", "GOOGLE_API_KEY"), ("classify (escalate)",), None),
    ]
    with pytest.raises(NoApiKeyError, match="ANTHROPIC_API_KEY.*GEMINI_API_KEY"):
        api.missing_keys(api.required_keys([spec], environ={"OPENAI_API_KEY": "sk-x"}))
