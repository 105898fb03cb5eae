"""Strict command-line values and YAML scalars: a bad value stops before anything is read or sent,
with exit 64 (usage) or a spec error naming the flag or the file:line and key path."""

from __future__ import annotations

import pytest
from conftest import make_spec

from batchor import api
from batchor.errors import UsageError


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["plan", "--mode", "foo"], "--mode"),
        (["plan", "--format", "yaml"], "--format"),
        (["plan", "--limit", "0"], "--limit"),
        (["plan", "--max-cost", "-1"], "--max-cost"),
        (["apply", "--max-cost", "-1"], "--max-cost"),
        (["apply", "--mode", "fast", "--yes"], "--mode"),
        (["apply", "--sample", "-3", "--yes"], "--sample"),
    ],
)
def test_bad_option_values_are_usage_errors_naming_the_flag(workdir, fake, args, flag, batchor_cli):
    spec = make_spec(workdir, rows=3)
    result = batchor_cli(workdir, args[0], spec, *args[1:])
    assert result.returncode == 64, result.stderr
    assert f"Invalid value for '{flag}'" in result.stderr
    assert "Traceback" not in result.stderr
    assert fake.stats()["requests"] == 0
    assert not (workdir / ".batchor").exists()  # refused before the spec was planned


def test_choices_accept_every_documented_value(workdir, batchor_cli):
    spec = make_spec(workdir, rows=2)
    for fmt, marker in (("json", '"plan_id"'), ("markdown", "### batchor plan"), ("text", "step classify")):
        result = batchor_cli(workdir, "plan", spec, "--mock", "--mode", "realtime", "--format", fmt)
        assert result.returncode == 0, result.stderr
        assert marker in result.stdout


def test_other_numeric_options_are_checked(workdir, batchor_cli):
    for args in (["runs", "--limit", "0"], ["prune", "--older-than", "-2"]):
        result = batchor_cli(workdir, *args)
        assert result.returncode == 64, (args, result.stderr)
        assert f"Invalid value for '{args[1]}'" in result.stderr


def test_python_api_refuses_the_same_values(workdir, batchor_cli):
    spec = make_spec(workdir, rows=2)
    with pytest.raises(UsageError, match="mode 'foo'"):
        api.plan(spec, mode="foo", save=False)
    with pytest.raises(UsageError, match="limit 0"):
        api.plan(spec, limit=0, save=False)
    compiled = api.plan(spec, mock=True, save=False)
    with pytest.raises(UsageError, match="max_cost -1"):
        api.apply_compiled(compiled, max_cost=-1)
    assert UsageError.exit_code == 64


def _with_params(workdir, extra: str):
    spec = make_spec(workdir, rows=2)
    text = spec.read_text(encoding="utf-8").replace("    max_tokens: 50\n", "    max_tokens: 50\n" + extra)
    spec.write_text(text, encoding="utf-8")
    return spec


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("    stop: NO\n", "`NO` reads as the boolean false"),
        ("    logprobs: on\n", "`on` reads as the boolean true"),
        ("    seed: 012\n", "`012` reads as the number 10"),
        ("    seed: 1_000\n", "`1_000` reads as the number 1000"),
    ],
)
def test_yaml_11_scalars_in_params_are_refused_with_line_and_key_path(workdir, fake, line, shown, batchor_cli):
    spec = _with_params(workdir, line)
    number = spec.read_text(encoding="utf-8").splitlines().index(line.rstrip("\n")) + 1
    key = line.strip().split(":")[0]
    for command in (["validate", spec], ["apply", spec, "--yes"]):
        result = batchor_cli(workdir, *command)
        assert result.returncode == 1, result.stderr
        assert f"error [spec_yaml]: {spec}:{number}: model.params.{key}: {shown}" in result.stderr
        assert "fix: quote it" in result.stderr
    assert fake.stats()["requests"] == 0


def test_quoted_and_yaml_12_scalars_are_kept_as_written(workdir, batchor_cli):
    spec = _with_params(workdir, "    stop: 'NO'\n    seed: \"012\"\n    logprobs: false\n    top_p: 0.5\n")
    steps = api.plan(spec, mock=True, save=False).header.steps
    params = steps[0].params
    assert (params["stop"], params["seed"], params["logprobs"], params["top_p"]) == ("NO", "012", False, 0.5)


def test_yaml_11_keys_are_refused_too(workdir, batchor_cli):
    spec = _with_params(workdir, "    logit_bias: {yes: 1}\n")
    result = batchor_cli(workdir, "validate", spec)
    assert result.returncode == 1
    assert "model.params.logit_bias: `yes` reads as the boolean true" in result.stderr
