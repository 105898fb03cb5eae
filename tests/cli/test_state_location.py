"""One state per project, wherever you stand: the state is found from the spec (nearest `.batchor/`
at or above it, else its git root, else its folder), the plan prints it, and a saved plan names it
so it applies from any folder (and is refused, saying why, when it really is stale)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_helpers import run_inprocess
from conftest import make_spec

from batchor.state import find_state


@pytest.fixture
def cli(monkeypatch, capsys):
    return lambda cwd, *args: run_inprocess(monkeypatch, capsys, cwd, *args)


@pytest.fixture
def project(workdir):
    """A git project with its spec two folders down, and an unrelated folder elsewhere."""
    root = workdir / "project"
    (root / ".git").mkdir(parents=True)
    make_spec(root / "jobs" / "reviews", rows=4)
    (workdir / "elsewhere").mkdir()
    return root


def state_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("  state "))


def test_same_spec_from_two_folders_uses_one_state_and_plans_nothing_again(project, cli):
    spec = project / "jobs" / "reviews" / "spec.yaml"
    code, _, err = cli(project / "jobs" / "reviews", "apply", "spec.yaml", "--mock", "--yes")
    assert code == 0, err
    expected = project / ".batchor" / "state.duckdb"
    assert expected.is_file()
    for cwd in (project, project.parent / "elsewhere", project / "jobs"):
        code, out, err = cli(cwd, "plan", spec, "--mock", "--json")
        assert code == 0, err
        totals = json.loads(out)["totals"]
        assert (totals["to_run"], totals["cached"]) == (0, 4), cwd
    code, out, _ = cli(project.parent / "elsewhere", "plan", spec, "--mock")
    assert state_line(out) == f"  state       {expected} (.batchor/ found in {project})"
    assert not (project.parent / "elsewhere" / ".batchor").exists()
    assert not (project / "jobs" / "reviews" / ".batchor").exists()


def test_operator_commands_find_the_project_state_from_a_subfolder(project, cli):
    assert cli(project, "apply", project / "jobs" / "reviews" / "spec.yaml", "--mock", "--yes")[0] == 0
    code, out, err = cli(project / "jobs", "runs", "--json")
    assert code == 0, err
    assert [r["name"] for r in json.loads(out)] == ["small"]


def test_search_order(workdir, monkeypatch):
    monkeypatch.delenv("BATCHOR_STATE", raising=False)
    plain = workdir / "plain" / "job"
    plain.mkdir(parents=True)
    assert find_state(spec_dir=plain).location == str(plain / ".batchor" / "state.duckdb")
    assert find_state(spec_dir=plain).source == "the spec's folder"
    (workdir / "plain" / ".batchor").mkdir()
    assert find_state(spec_dir=plain).location == str(workdir / "plain" / ".batchor" / "state.duckdb")
    repo = workdir / "outer" / "repo"
    (repo / ".git").mkdir(parents=True)
    (workdir / "outer" / ".batchor").mkdir()  # above the repository: not this project's
    inside = repo / "specs"
    inside.mkdir()
    chosen = find_state(spec_dir=inside)
    assert chosen.location == str(repo / ".batchor" / "state.duckdb")
    assert chosen.source == f"the git repository root {repo}"
    assert find_state(spec_state="db/st.duckdb", spec_dir=inside).location == str(inside / "db" / "st.duckdb")
    monkeypatch.setenv("BATCHOR_STATE", "env.duckdb")
    assert find_state(spec_dir=inside).location == str(workdir / "env.duckdb")
    assert find_state("cli.duckdb", spec_dir=inside).source == "--state"
    assert find_state("postgresql://u@h/db").location == "postgresql://u@h/db"


def test_a_saved_plan_applies_from_another_folder(project, cli):
    spec = project / "jobs" / "reviews" / "spec.yaml"
    assert cli(project, "apply", spec, "--mock", "--yes")[0] == 0
    make_spec(project / "jobs" / "reviews", rows=6)  # two new rows; four cached
    code, out, err = cli(project / "jobs", "plan", spec, "--mock", "--out", project / "saved.plan", "--json")
    assert code == 0, err
    assert json.loads(out)["totals"]["cached"] == 4
    code, _, err = cli(project.parent / "elsewhere", "apply", project / "saved.plan")
    assert code == 0, err
    assert not (project.parent / "elsewhere" / ".batchor").exists()
    code, out, _ = cli(project, "runs", "--json")
    assert [r["succeeded"] for r in json.loads(out)][:1] == [2]  # only the new rows: the 4 others were cached


def test_a_saved_plan_whose_state_is_gone_is_refused_naming_it(project, cli):
    spec = project / "jobs" / "reviews" / "spec.yaml"
    assert cli(project, "apply", spec, "--mock", "--yes")[0] == 0
    assert cli(project, "plan", spec, "--mock", "--out", project / "saved.plan")[0] == 0
    elsewhere = project.parent / "elsewhere"
    code, _, err = cli(elsewhere, "apply", project / "saved.plan", "--state", "other.duckdb", "--trust-plan")
    assert code == 5, err
    assert "[stale_plan]" in err and str(project / ".batchor" / "state.duckdb") in err
    assert str(elsewhere / "other.duckdb") in err and not (elsewhere / "other.duckdb").exists()
    shutil.rmtree(project / ".batchor" / "plans", ignore_errors=True)
    (project / ".batchor" / "state.duckdb").unlink()
    code, _, err = cli(elsewhere, "apply", project / "saved.plan")
    assert code == 5 and "counted 4 cached answer(s)" in err and "does not exist" in err


def test_plan_from_another_folder_prints_the_state_at_the_git_root(project, cli):
    code, out, err = cli(
        project.parent / "elsewhere", "plan", Path("..") / "project" / "jobs" / "reviews" / "spec.yaml", "--mock"
    )
    assert code == 0, err
    assert f"state       {project / '.batchor' / 'state.duckdb'} (the git repository root {project})" in out


def test_init_marks_the_new_job_folder_as_a_project(project, cli):
    code, out, err = cli(project.parent / "elsewhere", "init", "job")
    assert code == 0, err
    job = project.parent / "elsewhere" / "job"
    assert (job / ".batchor").is_dir() and f"created {Path('job') / '.batchor'}/" in out
    code, out, err = cli(project.parent, "plan", job / "job.yaml", "--mock")
    assert code == 0, err
    assert state_line(out) == f"  state       {job / '.batchor' / 'state.duckdb'} (.batchor/ found in {job})"


def test_init_inside_a_project_keeps_its_state_folder(project, cli):
    (project / ".batchor").mkdir()
    code, out, err = cli(project / "jobs", "init", "new", "--json")
    assert code == 0, err
    assert json.loads(out)["state_folder"] == str(project / ".batchor")
    assert not (project / "jobs" / "new" / ".batchor").exists()


def test_runs_from_above_a_spec_outside_git_says_where_it_looked_and_names_the_state_below(workdir, cli):
    """No git, no `.batchor/` above: the spec's state goes to the spec's folder, so `runs` from the
    folder above finds none there. It says where it looked and why, and names the state below."""
    make_spec(workdir / "specs", rows=3)
    code, _, err = cli(workdir, "apply", "specs/spec.yaml", "--mock", "--yes")
    assert code == 0, err
    below = workdir / "specs" / ".batchor" / "state.duckdb"
    assert below.is_file()
    code, out, _ = cli(workdir, "runs")
    assert code == 0
    assert (
        f"no state at {workdir / '.batchor' / 'state.duckdb'} (its location comes from the working folder: "
        "no .batchor/ folder or git repository at or above it)" in out
    ), out
    assert "--state specs/.batchor/state.duckdb" in out, out
    code, out, _ = cli(workdir, "runs", "--state", "specs/.batchor/state.duckdb")  # the command it names works
    assert code == 0 and "small" in out and "succeeded" in out, out
    code, _, err = cli(workdir, "status")  # the readers' no_state error names it too
    assert code == 1 and "--state specs/.batchor/state.duckdb" in err, err
    make_spec(workdir / "other", rows=3)  # a spec never applied: its own state is missing, no other is offered
    code, _, err = cli(workdir, "check", "other/spec.yaml")
    assert code == 1 and "no_state" in err and "specs/.batchor" not in err and "batchor apply SPEC" in err, err
    assert not (workdir / ".batchor").exists()
