"""Installed the way a user installs it, outside this repository (slow: each test makes a fresh
venv and installs every dependency): from the git URL at a commit, as the README's
`pipx install "git+https://github.com/batchor-dev/batchor@v0.2.0"` does, and by the Dockerfile's
own build and install commands. Then, in a scratch user repository with only a spec, a CSV and a
schema: validate, plan, apply --mock, and the action's plan step with that installed batchor.

The runtime dependencies are installed once per test worker, from the index, into a venv of their
own that each fresh venv sees through a `.pth` file: each test's pip then installs batchor alone
(seconds, not two minutes each). A clean install that resolves every dependency is `.ci/run`'s
own first steps (`pip install -e .`, and the built wheel, each in a new venv)."""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from action_helpers import ROOT, make_user_repo, run_script, runner_files
from test_deploy_files import DOCKERFILE, instructions

from batchor.version import __version__

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]  # a fresh venv installs every dependency

USER_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.endswith("_API_KEY")}
USER_ENV.pop("BATCHOR_STATE", None)


@pytest.fixture(scope="session")
def dependencies(tmp_path_factory) -> Path:
    """The site-packages of a venv holding pyproject's runtime dependencies (not batchor): made by
    the first test worker that needs it, under a lock the others wait on, then shared."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the run's folder, not a worker's
    folder = shared / "user-install-dependencies"
    with open(shared / "user-install-dependencies.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "ready").exists():
            shutil.rmtree(folder, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
            needs = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
            sh(shlex.join(["pip", "install", "--quiet", *needs]), folder, folder / "bin")
            (folder / "ready").touch()
    return _site_packages(folder)


def fresh_venv(folder: Path, dependencies: Path) -> Path:
    """A new venv that sees the installed dependencies (and nothing else of this machine's)."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    (_site_packages(folder) / "dependencies.pth").write_text(f"{dependencies}\n", encoding="utf-8")
    return folder / "bin"


def _site_packages(venv: Path) -> Path:
    return venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def sh(command: str, cwd: Path, bin_dir: Path, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    env = {**USER_ENV, "PATH": f"{bin_dir}{os.pathsep}{USER_ENV['PATH']}", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    done = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def quickstart(repo: Path, bin_dir: Path) -> None:
    """The user's first commands, run in their repository with the installed `batchor`."""
    sh("batchor validate specs/labels.yaml", repo, bin_dir)
    done = sh("batchor plan specs/labels.yaml", repo, bin_dir)
    assert "3 to run" in done.stdout + done.stderr
    sh("batchor apply specs/labels.yaml --mock --yes", repo, bin_dir)
    assert len((repo / "out" / "labels.mock.csv").read_text().splitlines()) == 4


def test_a_user_repository_installs_from_the_git_url_at_a_commit_and_runs_the_quickstart(tmp_path, dependencies):
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    commit_id = commit.stdout.strip()
    bin_dir = fresh_venv(tmp_path / "venv", dependencies)
    url = f"git+file://{ROOT}@{commit_id}"
    sh(f"pip install --quiet {shlex.quote(url)}", tmp_path, bin_dir)
    repo = make_user_repo(tmp_path / "repo")
    lines = sh("batchor --version", repo, bin_dir).stdout.splitlines()
    assert lines[0] == f"batchor {__version__}"
    assert lines[1] == f"installed from: git+file://{ROOT}@{commit_id} (commit {commit_id[:12]})"
    assert lines[2].startswith(f"package: {tmp_path / 'venv'}")
    quickstart(repo, bin_dir)
    # the action's plan step, with this installed batchor and no key: the comment file it writes
    comment = tmp_path / "plan.md"
    env = {**runner_files(tmp_path / "runner"), "BATCHOR_SPECS": "specs/*.yaml", "BATCHOR_COMMENT_FILE": str(comment)}
    done = run_script("plan.sh", repo, bin_dir, {**env, "PYTHONPATH": "", "OPENAI_API_KEY": ""})
    assert done.returncode == 0, done.stderr
    assert comment.read_text().startswith("## batchor plan\n") and "OPENAI_API_KEY" in comment.read_text()


def test_the_dockerfiles_build_install_and_entrypoint_commands_work_in_a_fresh_venv(tmp_path, dependencies):
    steps = instructions(DOCKERFILE)
    stages = [i for i, (op, _) in enumerate(steps) if op == "FROM"]
    build, final = steps[stages[0] : stages[1]], steps[stages[1] :]
    src, dist = tmp_path / "src", tmp_path / "dist"
    src.mkdir()
    for op, args in build:  # COPY what the build stage copies, from this checkout
        if op == "COPY":
            *sources, target = args.split()
            for name in sources:
                copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy
                copy(ROOT / name, src / target / name if target.endswith("/") else src / target)
    bin_dir = fresh_venv(tmp_path / "venv", dependencies)
    wheel = next(args for op, args in build if op == "RUN" and "pip wheel" in args)
    sh(wheel.replace("/dist", str(dist)), src, bin_dir)
    install = next(args for op, args in final if op == "RUN" and "pip install" in args).split("&&")[0]
    sh(install.replace("/dist", str(dist)), tmp_path, bin_dir)  # the user and /job steps need root
    entrypoint = json.loads(next(args for op, args in final if op == "ENTRYPOINT"))
    default = json.loads(next(args for op, args in final if op == "CMD"))
    job = tmp_path / "job"
    job.mkdir()
    assert "Usage" in sh(shlex.join(entrypoint + default), job, bin_dir).stdout
    version = sh(shlex.join([*entrypoint, "--version"]), job, bin_dir).stdout
    assert f"installed from: the file {dist}/batchor_llm-{__version__}-py3-none-any.whl" in version
    sh(shlex.join([*entrypoint, "init", "labels"]), job, bin_dir)
    sh(shlex.join([*entrypoint, "apply", "labels/job.yaml", "--mock", "--yes"]), job, bin_dir)
    assert (job / "labels" / "out" / "results.mock.csv").is_file()
