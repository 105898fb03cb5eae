"""The composite action (action.yml) and the CI example that uses it: their shape, the linters
(actionlint, ShellCheck on every script and every `run:` block), and that the example passes a
key for every provider this repository's own specs use."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import yaml
from action_helpers import ACTION, ROOT, SCRIPTS, WORKFLOW, linter, tool

from batchor import api
from batchor.version import __version__

KEY_INPUTS = {"OPENAI_API_KEY": "openai-api-key", "ANTHROPIC_API_KEY": "anthropic-api-key"}
KEY_INPUTS |= {"GEMINI_API_KEY": "gemini-api-key", "GOOGLE_API_KEY": "gemini-api-key"}


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def steps() -> list[dict]:
    return load(ACTION)["runs"]["steps"]


def test_the_action_is_composite_installs_from_its_own_checkout_and_keeps_logic_in_scripts():
    action = load(ACTION)
    assert action["runs"]["using"] == "composite"
    assert {"specs", "command", "budget", "state", "openai-api-key", "anthropic-api-key", "gemini-api-key"} <= set(
        action["inputs"]
    )
    text = ACTION.read_text(encoding="utf-8")
    assert "pip install batchor" not in text  # that name on the public index is another project
    install = next(s for s in steps() if s.get("name", "").startswith("install"))
    assert install["run"] == 'bash "$GITHUB_ACTION_PATH/action/install.sh" "$GITHUB_ACTION_PATH"'
    for step in steps():
        for script in re.findall(r"action/(\w+\.sh)", step.get("run", "")):
            assert (SCRIPTS / script).is_file(), script
        assert len(step.get("run", "").splitlines()) <= 2, f"logic belongs in action/*.sh: {step.get('name')}"


def test_the_state_cache_key_is_new_on_every_attempt_so_a_rerun_can_save_it():
    restore = next(s for s in steps() if s.get("uses", "").startswith("actions/cache/restore"))
    save = next(s for s in steps() if s.get("uses", "").startswith("actions/cache/save"))
    assert restore["with"]["key"] == save["with"]["key"]
    assert "github.run_id" in save["with"]["key"] and "github.run_attempt" in save["with"]["key"]
    assert save["with"]["key"].startswith(restore["with"]["restore-keys"])
    assert "always()" in save["if"]  # answers paid for are kept when a gate fails


def test_every_key_input_reaches_apply_under_its_variable():
    apply = next(s for s in steps() if s.get("id") == "apply")
    for variable, name in KEY_INPUTS.items():
        if variable != "GOOGLE_API_KEY":
            assert apply["env"][variable] == f"${{{{ inputs.{name} }}}}"


def test_the_example_uses_this_version_and_passes_every_key_the_repositorys_specs_need():
    job = load(WORKFLOW)["jobs"]["batchor"]
    use = next(s for s in job["steps"] if s.get("uses", "").startswith("batchor-dev/batchor@"))
    assert use["uses"] == f"batchor-dev/batchor@v{__version__}"
    needs = api.required_keys(sorted((ROOT / "specs").glob("*.yaml")), environ={})
    assert {n.provider for n in needs} >= {"openai", "anthropic", "gemini"}
    for need in needs:
        assert any(KEY_INPUTS[env] in use["with"] for env in need.envs), f"{need.spec} needs {need.envs}"
    assert load(WORKFLOW)["permissions"]["pull-requests"] == "write"


def test_scripts_and_run_blocks_pass_shellcheck(tmp_path):
    shellcheck = linter("shellcheck")
    blocks = []
    for i, step in enumerate(steps()):
        if "run" in step:
            block = tmp_path / f"step{i}.sh"
            block.write_text("#!/usr/bin/env bash\n" + step["run"])
            blocks.append(str(block))
    scripts = sorted(str(p.relative_to(ROOT)) for p in SCRIPTS.glob("*.sh"))
    done = subprocess.run([shellcheck, "-x", *scripts, *blocks], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_passes_on_the_example_and_on_a_workflow_using_the_action(tmp_path):
    actionlint = linter("actionlint")
    shellcheck = tool("shellcheck") or ""
    done = subprocess.run([actionlint, f"-shellcheck={shellcheck}", "-no-color", str(WORKFLOW)], capture_output=True)
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
    # actionlint checks a local action's metadata (inputs, outputs) where a workflow `uses: ./` it
    repo = tmp_path / "repo"
    shutil.copytree(SCRIPTS, repo / "action")
    shutil.copy(ACTION, repo / "action.yml")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    flow = WORKFLOW.read_text(encoding="utf-8").replace(f"batchor-dev/batchor@v{__version__}", "./")
    local = repo / ".github" / "workflows" / "local.yml"
    local.parent.mkdir(parents=True)
    local.write_text(flow)
    done = subprocess.run([actionlint, f"-shellcheck={shellcheck}", "-no-color"], cwd=repo, capture_output=True)
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
    local.write_text(flow.replace("budget:", "budjet:"))  # the check can fail: a misspelt input
    done = subprocess.run([actionlint, "-no-color"], cwd=repo, capture_output=True, text=True)
    assert done.returncode == 1 and "budjet" in done.stdout
