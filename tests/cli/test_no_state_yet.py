"""Commands that only read the state, run where there is none yet, say so and create nothing: no
empty `.batchor/` left in whatever folder the user happened to be in (they used to make one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import batchor
from batchor.cli.main import app
from batchor.errors import NoStateError
from tests.conftest import make_spec

READERS = [
    ["status"],
    ["status", "--json"],
    ["status", "r2026"],
    ["results"],
    ["results", "--json"],
    ["export", "-o", "out.csv"],
    ["export", "--attempts", "-o", "attempts.jsonl"],
    ["report"],
    ["report", "-o", "report.html"],
    ["report", "--json"],
    ["cancel"],
    ["prune"],
    ["check"],
    ["check", "spec.yaml"],
    ["state", "check"],
]


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def project(workdir):
    """A folder with a spec and its data that was never applied."""
    make_spec(workdir, rows=3)
    return workdir


@pytest.mark.parametrize("args", READERS, ids=" ".join)
def test_a_reading_command_without_state_names_the_fix_and_creates_nothing(project, args, batchor_cli):
    before = _tree(project)
    result = batchor_cli(project, *args)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "error [no_state]: no batchor state yet" in result.stderr, result.stderr
    assert f"{project / '.batchor' / 'state.duckdb'} does not exist" in result.stderr
    assert "batchor apply SPEC" in result.stderr and "Traceback" not in result.stderr
    assert _tree(project) == before


def test_runs_without_state_is_an_empty_history_and_creates_nothing(project):
    before = _tree(project)
    human = CliRunner().invoke(app, ["runs"])
    assert human.exit_code == 0 and human.output.startswith("no runs yet: no state at "), human.output
    machine = CliRunner().invoke(app, ["runs", "--json"])
    assert machine.exit_code == 0 and json.loads(machine.output) == []
    assert _tree(project) == before


def test_the_python_calls_without_state_raise_no_state_and_create_nothing(project):
    before = _tree(project)
    with pytest.raises(NoStateError) as raised:
        batchor.status()
    assert raised.value.code == "no_state"
    with pytest.raises(NoStateError):
        batchor.export(project / "out.csv")
    assert batchor.runs() == []
    assert _tree(project) == before


def test_an_explicit_state_that_does_not_exist_is_named(project, batchor_cli):
    missing = project / "elsewhere" / "state.duckdb"
    result = batchor_cli(project, "status", "--state", missing, "--json")
    assert result.returncode == 1 and json.loads(result.stdout.splitlines()[-1])["code"] == "no_state"
    assert f"{missing} does not exist (its location comes from --state)" in result.stderr
    assert not (project / "elsewhere").exists()
