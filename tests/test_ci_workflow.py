"""The GitHub Actions example (examples/ci/batchor.yml) parses, passes a workflow linter, and maps
every batchor exit code to the right CI outcome: its shell steps run here against a stand-in
`batchor` that exits with each code in turn."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from batchor import errors

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "examples" / "ci" / "batchor.yml"
EXIT_CODES = {value for name, value in vars(errors).items() if name.startswith("EXIT_")}


def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def step(job: str, name: str) -> dict:
    return next(s for s in workflow()["jobs"][job]["steps"] if s.get("name") == name)


def tool(name: str) -> str | None:
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


def test_workflow_is_valid_yaml_with_the_blocks_ci_needs():
    flow = workflow()
    triggers = flow.get("on", flow.get(True))  # YAML 1.1 reads the key `on` as true
    assert set(triggers) == {"pull_request", "push"}
    assert flow["permissions"] == {"contents": "read"}
    assert flow["concurrency"]["group"]
    assert flow["jobs"]["plan"]["permissions"]["pull-requests"] == "write"
    text = WORKFLOW.read_text(encoding="utf-8")
    assert "pip install batchor" not in text  # that name on the public index is another project
    installs = [s["run"] for job in flow["jobs"].values() for s in job["steps"] if "pip install" in s.get("run", "")]
    assert installs and all(run.strip() == "pip install ." for run in installs)
    assert "--max-cost" in step("apply", "apply")["run"]
    assert any("actions/cache" in s.get("uses", "") for s in flow["jobs"]["apply"]["steps"])


def test_workflow_passes_actionlint_with_shellcheck():
    actionlint = tool("actionlint")
    if actionlint is None:
        if os.environ.get("CI"):
            pytest.fail("actionlint is missing: it comes with the test extra (pip install -e '.[test]')")
        pytest.skip("actionlint not installed (pip install -e '.[test]')")
    shellcheck = tool("shellcheck")
    result = subprocess.run(
        [actionlint, f"-shellcheck={shellcheck or ''}", "-no-color", str(WORKFLOW)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def run_step(script: str, tmp_path: Path, stderr: str = "", **codes: int) -> int:
    """Run a workflow step's script as GitHub does (bash -e -o pipefail), with a `batchor` that
    exits with `codes[command]` (0 for a command not given) and prints `stderr`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "batchor"
    cases = "".join(f"  {command}) exit {code} ;;\n" for command, code in codes.items())
    fake.write_text(f"#!/bin/sh\necho '{stderr}' >&2\ncase \"$1\" in\n{cases}esac\nexit 0\n")
    fake.chmod(0o755)
    (tmp_path / "specs").mkdir(exist_ok=True)
    (tmp_path / "specs" / "job.yaml").write_text("version: 1\n")
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode


@pytest.mark.parametrize("code", sorted(EXIT_CODES))
def test_apply_step_maps_each_exit_code(tmp_path, code):
    # in flight (7) and interrupted (130) resume on the next run; everything else but 0 fails the job
    passes = code in (errors.EXIT_OK, errors.EXIT_IN_FLIGHT, errors.EXIT_INTERRUPTED)
    assert (run_step(step("apply", "apply")["run"], tmp_path, apply=code) == 0) == passes


@pytest.mark.parametrize("code", sorted(EXIT_CODES))
def test_pr_plan_maps_each_exit_code(tmp_path, code):
    # on a pull request pending work (2) is the point and a plan over budget (4) only warns
    passes = code in (errors.EXIT_OK, errors.EXIT_PENDING, errors.EXIT_COST_LIMIT)
    assert (run_step(step("plan", "plan and check")["run"], tmp_path, plan=code) == 0) == passes


@pytest.mark.parametrize("code", sorted(EXIT_CODES))
def test_pr_check_maps_each_exit_code(tmp_path, code):
    # failed checks on main's stored answers (9) warn on a PR; main's apply is the gate
    passes = code in (errors.EXIT_OK, errors.EXIT_CHECKS_FAILED)
    assert (run_step(step("plan", "plan and check")["run"], tmp_path, check=code) == 0) == passes


@pytest.mark.parametrize("error", ["error [run_not_found]: no runs yet", "error [no_state]: no batchor state yet"])
def test_pr_check_tolerates_a_spec_that_never_ran(tmp_path, error):
    script = step("plan", "plan and check")["run"]
    assert run_step(script, tmp_path, stderr=error, check=1) == 0
    assert "has not run on main yet" in (tmp_path / "comment.md").read_text()
