"""Every shell, Python and YAML example in README.md and docs/ is run or validated, so the docs cannot show
a command or a spec that does not work. The YAML checks are fast; running the shell examples takes
a few dozen real commands, so that test is in the slow tier (CI runs it).

A page's examples run in order in one scratch copy of the repository (specs/, schemas/, examples/),
offline (no API key in the environment). An HTML comment on the line before a block changes what
happens to it:

- `<!-- skip: reason -->`: not run (needs a real API key, installs from the network, ...);
- `<!-- expect-exit: N -->`: a shell block that must exit with N (a deliberate mistake);
- `<!-- fragment -->`: a YAML block that is part of a spec: parsed as YAML only;
- `<!-- file: PATH -->`: a YAML spec written to PATH in the scratch copy (later blocks use it);
- `<!-- setup: COMMAND -->`: a shell block that needs something first (a run to report on): the
  command runs before it, and the page's text says so.

Any other YAML block with `version:` is a whole spec, checked by batchor's own spec loader
(`batchor.validate`); one without it must say it is a fragment.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

import batchor

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)
MARKER = re.compile(r"<!--\s*(skip|expect-exit|fragment|file|setup)\s*:?\s*(.*?)\s*-->\s*$")
SHELL = {"bash", "sh", "shell", "console"}


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    body: str
    marker: str | None
    argument: str

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = MARKER.search(before)
        body = "\n".join(line[len(match["indent"]) :] for line in match["body"].splitlines())
        found.append(
            Block(
                page,
                text.count("\n", 0, match.start()) + 1,
                match["lang"].lower(),
                body,
                marker[1] if marker else None,
                marker[2] if marker else "",
            )
        )
    return found


def _scratch(tmp_path: Path) -> Path:
    work = tmp_path / "repo"
    for folder in ("specs", "schemas", "examples"):
        shutil.copytree(ROOT / folder, work / folder)
    (work / ".batchor").mkdir()
    return work


def _environment(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("BATCHOR_")}
    bin_dir = work / ".bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "batchor"  # this checkout's batchor, whatever `batchor` is on PATH
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c "from batchor.cli.entry import main; main()" "$@"\n')
    script.chmod(0o755)
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(ROOT), NO_COLOR="1", TERM="dumb")
    return env


def _run_shell(block: Block, work: Path, env: dict[str, str]) -> None:
    expected = int(block.argument) if block.marker == "expect-exit" else 0
    lines = [line[2:] if line.startswith("$ ") else line for line in block.body.splitlines()]
    if block.marker == "setup":
        lines.insert(0, block.argument)
    if block.lang == "console":
        lines = [line for line in lines if not line.startswith(" ")]
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", "\n".join(lines)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == expected, (
        f"{block.where()}: exit {done.returncode}, expected {expected}\n{block.body}\n{done.stdout}\n{done.stderr}"
    )


def _run_python(block: Block, work: Path, env: dict[str, str]) -> None:
    script = work / "_docs_example.py"
    script.write_text(block.body, encoding="utf-8")
    done = subprocess.run([sys.executable, script.name], cwd=work, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"{block.where()}: exit {done.returncode}\n{block.body}\n{done.stderr}"


def _check_yaml(block: Block, work: Path) -> None:
    data = yaml.safe_load(block.body)
    if block.marker == "fragment":
        return
    assert isinstance(data, dict) and "version" in data, (
        f"{block.where()}: a YAML example that is not a whole spec needs `<!-- fragment -->` before it"
    )
    target = work / (block.argument if block.marker == "file" else "specs/_docs_example.yaml")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(block.body, encoding="utf-8")
    if block.marker != "file":  # a file a later block runs is checked by that block (it may be a mistake)
        batchor.validate(str(target))


def _example_pages() -> list[Path]:
    return [page for page in PAGES if any(b.lang in SHELL | {"yaml", "yml", "python"} for b in blocks(page))]


@pytest.mark.parametrize("page", _example_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_yaml_example_of_the_page_validates(page, tmp_path):
    work = _scratch(tmp_path)
    for block in blocks(page):
        if block.lang in ("yaml", "yml") and block.marker != "skip":
            _check_yaml(block, work)
        elif block.marker == "skip":
            assert block.argument, f"{block.where()}: say why the example is skipped"


@pytest.mark.slow  # a few dozen real commands: CI's full tier runs them
@pytest.mark.parametrize("page", _example_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shell_example_of_the_page_runs(page, tmp_path):
    work = _scratch(tmp_path)
    env = _environment(work)
    for block in blocks(page):
        if block.marker == "skip":
            continue
        if block.lang in SHELL:
            _run_shell(block, work, env)
        elif block.lang == "python" and "import batchor" in block.body:  # not the reference's signatures
            _run_python(block, work, env)
        elif block.lang in ("yaml", "yml") and block.marker == "file":
            _check_yaml(block, work)


def test_the_extractor_sees_markers_and_blocks(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("text\n\n<!-- skip: needs a key -->\n```bash\nbatchor apply x\n```\n\n```yaml\na: 1\n```\n")
    found = blocks(page)
    assert [(b.lang, b.marker, b.argument, b.line) for b in found] == [
        ("bash", "skip", "needs a key", 4),
        ("yaml", None, "", 8),
    ]
