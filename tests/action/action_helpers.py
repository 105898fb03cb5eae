"""Run the composite action's scripts (action/*.sh) as the runner does: bash, the step's env, a
`GITHUB_OUTPUT`/`GITHUB_ENV`/`GITHUB_STEP_SUMMARY` file each, and a chosen `batchor` on PATH."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ACTION = ROOT / "action.yml"
SCRIPTS = ROOT / "action"
WORKFLOW = ROOT / "examples" / "ci" / "batchor.yml"


def tool(name: str) -> str | None:
    """A linter from the test extra: beside this Python (a venv's bin/), else on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


def linter(name: str) -> str:
    """A linter from the test extra; a missing one fails on CI and skips elsewhere."""
    import pytest

    found = tool(name)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is missing: it comes with the test extra (pip install -e '.[test]')")
        pytest.skip(f"{name} not installed (pip install -e '.[test]')")
    return found


def this_batchor(bin_dir: Path) -> Path:
    """A `batchor` command running this checkout's code with this Python."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    shim = bin_dir / "batchor"
    shim.write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -m batchor.cli.main "$@"\n')
    shim.chmod(0o755)
    return bin_dir


def runner_files(folder: Path) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    names = {"GITHUB_OUTPUT": "output", "GITHUB_ENV": "env", "GITHUB_STEP_SUMMARY": "summary.md"}
    for name in names.values():
        (folder / name).write_text("")
    return {var: str(folder / name) for var, name in names.items()}


def run_script(
    name: str, cwd: Path, bin_dir: Path, env: dict[str, str], *, gh: bool = False
) -> subprocess.CompletedProcess[str]:
    """`bash action/NAME.sh` in `cwd`, with `bin_dir` first on PATH and without a real `gh` unless
    `gh` (the test puts its own stand-in in `bin_dir` then)."""
    path = [str(bin_dir)] + [p for p in os.environ["PATH"].split(os.pathsep) if gh or not (Path(p) / "gh").exists()]
    full = {**os.environ, "PATH": os.pathsep.join(path), "GITHUB_REPOSITORY": "acme/reviews", **env}
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", str(SCRIPTS / name)],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def outputs(path: str) -> dict[str, str]:
    lines = Path(path).read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


SPEC = """\
version: 1
name: labels
input:
  path: ../data/rows.csv
  key: id
model:
  provider: openai
  name: gpt-4.1-mini
  params: {temperature: 0, max_tokens: 60}
steps:
  label:
    system: You label short texts.
    prompt: "Text: {{ row.text }}"
    output:
      schema: ../schemas/label.schema.json
output:
  path: ../out/labels.csv
limits:
  concurrency: 4
  max_attempts: 2
  request_timeout_s: 10
"""
SCHEMA = """\
{"type": "object", "properties": {"label": {"type": "string", "enum": ["positive", "negative", "neutral"]}},
 "required": ["label"], "additionalProperties": false}
"""
ROWS = "id,text\n1,I love it\n2,It broke on day one\n3,It is a chair\n"


def make_user_repo(folder: Path) -> Path:
    """A user's repository as the README's quickstart assumes it: a spec, a CSV and a schema, nothing
    of batchor's own (no pyproject, no schemas of ours), under git."""
    for name, text in {"specs/labels.yaml": SPEC, "schemas/label.schema.json": SCHEMA, "data/rows.csv": ROWS}.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    return folder
