"""`batchor show PLANFILE|SPEC` prints the whole plan, and `--prompts N` the requests exactly as the
provider receives them (checked against the bodies the fake provider got); `plan` is coloured on a
terminal only."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess

import pytest
import yaml
from cli_helpers import cli_command, cli_env, run_cli, run_inprocess
from conftest import make_spec

from batchor import api
from batchor.cli.colour import coloured


@pytest.fixture
def cli(monkeypatch, capsys):
    return lambda cwd, *args: run_inprocess(monkeypatch, capsys, cwd, *args)


def test_show_a_spec_and_its_saved_plan_alike(workdir, cli):
    make_spec(workdir, rows=3)
    code, out, err = cli(workdir, "plan", "spec.yaml", "--out", "saved.plan")
    assert code == 0, err
    code, from_plan, err = cli(workdir, "show", "saved.plan")
    assert code == 0, err
    code, from_spec, err = cli(workdir, "show", "spec.yaml")
    assert code == 0, err
    step = from_plan[from_plan.index("step classify") :]
    assert step == from_spec[from_spec.index("step classify") :]
    assert "step classify: openai:gpt-4.1-mini [realtime]" in step
    assert "counts      3 rows: 3 to run (0 changed), 0 cached, 0 skipped" in step
    assert "source      genai-prices" in step and "price       $0.40 in, $1.60 out per MTok" in step
    assert 'params      {"temperature": 0, "max_tokens": 50}' in step and "schema      strict" in step
    assert f"state       {workdir / '.batchor' / 'state.duckdb'}" in from_plan
    assert "\x1b[" not in from_plan  # not a terminal: plain


@pytest.mark.parametrize(
    ("provider", "model", "extra"),
    [
        ("openai", "gpt-4.1-mini", {}),
        ("openai", "gpt-4.1-mini", {"api": "responses"}),
        ("anthropic", "claude-haiku-4-5", {}),
        ("anthropic", "claude-haiku-4-5", {"options": {"structured": "tool"}}),
    ],
)
def test_prompts_are_the_bodies_the_provider_receives(workdir, fake, cli, provider, model, extra):
    spec = make_spec(workdir, rows=2)
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    data["model"].update(provider=provider, name=model, **extra)
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    code, out, err = cli(workdir, "show", "spec.yaml", "--prompts", "2", "--json")
    assert code == 0, err
    requests = json.loads(out)["steps"][0]["requests"]
    assert requests["sent_as"].startswith("POST")
    shown = [s["body"] for s in requests["samples"]]
    assert len(shown) == 2
    assert cli(workdir, "apply", "spec.yaml", "--yes")[0] == 0
    received = fake.stats()["bodies"]
    canonical = lambda body: json.dumps(body, sort_keys=True)  # noqa: E731 - key order is not content
    assert sorted(map(canonical, shown)) == sorted(map(canonical, received))


def test_prompts_for_gemini_carry_the_same_contents_and_schema(workdir, fake, cli):
    spec = make_spec(workdir, rows=1)
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    data["model"].update(provider="gemini", name="gemini-2.5-flash")
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    code, out, _ = cli(workdir, "show", "spec.yaml", "--prompts", "1", "--json")
    shown = json.loads(out)["steps"][0]["requests"]["samples"][0]["body"]
    assert cli(workdir, "apply", "spec.yaml", "--yes")[0] == 0
    received = fake.stats()["bodies"][0]
    assert received["contents"] == shown["contents"]
    assert received["systemInstruction"]["parts"][0]["text"] == shown["config"]["system_instruction"]
    assert received["generationConfig"]["responseJsonSchema"] == shown["config"]["response_json_schema"]


def test_dependent_steps_say_when_their_requests_are_rendered(workdir, cli):
    spec = make_spec(workdir, rows=2)
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    data["steps"]["reply"] = {"prompt": "Reply to a {{ classify.sentiment }} review", "output": "text"}
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    code, out, err = cli(workdir, "show", "spec.yaml", "--prompts", "1", "--mock")
    assert code == 0, err
    reply = out[out.index("step reply") :]
    assert "after       classify" in reply and "rendered during apply, from the answers of classify" in reply
    assert '"content": "Review: review number 0"' in out  # the root step's sample, as sent


def test_bad_values_are_usage_errors(workdir, cli):
    make_spec(workdir, rows=1)
    assert cli(workdir, "show", "spec.yaml", "--prompts", "-1")[0] == 64
    code, _, err = cli(workdir, "show", "missing.plan")
    assert code == 5 and "[plan_invalid]" in err


def test_unpriced_steps_show_no_price_in_show(workdir, cli):
    spec = make_spec(workdir, rows=1)
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    data["model"].update(name="ft:house", custom=True)
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    code, out, _ = cli(workdir, "show", "spec.yaml")
    assert code == 0 and "cost        cost unknown (no price)" in out and "price       none" in out


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    text = "Plan abc for 'x'\n  budget      $5.00 (ABOVE budget; --max-cost)"
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert "\x1b[" in coloured(text, Tty())
    assert coloured(text, io.StringIO()) == text
    monkeypatch.setenv("NO_COLOR", "1")
    assert coloured(text, Tty()) == text


@pytest.mark.slow  # a real process on a pseudo-terminal (the colour rule itself is tested above)
def test_plan_on_a_real_terminal_is_coloured(workdir, batchor_cli):
    make_spec(workdir, rows=2)
    master, slave = pty.openpty()
    env = cli_env(TERM="xterm-256color", NO_COLOR=None)
    process = subprocess.run(
        cli_command("plan", "spec.yaml"),
        cwd=workdir,
        env=env,
        stdout=slave,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    os.close(slave)
    screen = os.read(master, 65536).decode()
    os.close(master)
    assert process.returncode == 0, process.stderr
    assert "\x1b[" in screen and "to run" in screen
    piped = batchor_cli(workdir, "plan", "spec.yaml")
    assert "\x1b[" not in piped.stdout and "to run" in piped.stdout


@pytest.mark.slow  # a real process; test_show_a_spec_and_its_saved_plan_alike runs `show` in process
def test_show_in_a_real_process(workdir):
    make_spec(workdir, rows=2)
    plan = api.plan(str(workdir / "spec.yaml"), save=str(workdir / "p.plan"))
    result = run_cli(workdir, "show", "p.plan", "--prompts", "1")
    assert result.returncode == 0, result.stderr
    assert f"Plan {plan.plan_id} for 'small'" in result.stdout
    assert "request 1   row r0" in result.stdout and '"response_format"' in result.stdout


def test_diff_shows_earlier_and_new_messages_of_changed_rows(workdir, cli):
    spec = make_spec(workdir, rows=2)
    assert cli(workdir, "apply", "spec.yaml", "--mock", "--yes")[0] == 0
    spec.write_text(
        spec.read_text(encoding="utf-8").replace("Review: {{ row.text }}", "Judge: {{ row.text }}"), encoding="utf-8"
    )
    code, out, err = cli(workdir, "show", "spec.yaml", "--mock", "--diff", "1")
    assert code == 0, err
    assert "2 changed: template 2" in out
    assert out.count("  changed row ") == 1
    assert '-      "content": "Review: review number 0"' in out and '+      "content": "Judge: review number 0"' in out


def test_diff_shows_model_params_and_schema_changes(workdir, fake, cli):
    make_spec(workdir, rows=2)
    assert cli(workdir, "apply", "spec.yaml", "--yes")[0] == 0
    make_spec(workdir, rows=2, model="gpt-4.1-nano", schema=None)
    spec = workdir / "spec.yaml"
    spec.write_text(spec.read_text(encoding="utf-8").replace("max_tokens: 50", "max_tokens: 60"), encoding="utf-8")
    code, out, err = cli(workdir, "show", "spec.yaml", "--diff", "1")
    assert code == 0, err
    assert "2 changed: model+params+schema 2" in out
    assert '-  "model": "openai:gpt-4.1-mini",' in out and '+  "model": "openai:gpt-4.1-nano",' in out
    assert '-    "max_tokens": 50' in out and '+    "max_tokens": 60' in out
    assert '+  "schema": null,' in out and '-  "schema": {' in out


def test_diff_of_a_step_rendered_during_apply_shows_its_settings(workdir, fake, cli):
    steps = {
        "classify": {"prompt": "Review: {{ row.text }}", "output": "text"},
        "reply": {"prompt": "Reply to {{ classify }}", "output": "text"},
    }
    make_spec(workdir, rows=2, steps=steps)
    assert cli(workdir, "apply", "spec.yaml", "--yes")[0] == 0
    steps["reply"]["model"] = {"name": "gpt-4.1-nano"}
    make_spec(workdir, rows=2, steps=steps)
    code, out, err = cli(workdir, "show", "spec.yaml", "--diff", "1")
    assert code == 0, err
    assert "2 changed: model 2" in out and "changed settings (requests rendered during apply)" in out
    assert '-  "model": "openai:gpt-4.1-mini",' in out and '+  "model": "openai:gpt-4.1-nano",' in out
