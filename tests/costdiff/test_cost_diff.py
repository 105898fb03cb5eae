"""`plan --compare-to BASE`: the FULL job's cost at a git revision or a saved plan and now, per step
with its cause, and `--fail-on-increase` as a gate with its own exit code."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

import batchor
from batchor import api
from batchor.errors import EXIT_COST_INCREASE, EXIT_OK, EXIT_USAGE, CompareBaseError, CostIncreaseError
from tests.conftest import make_spec


def _git(folder: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=folder,
        check=True,
        capture_output=True,
    )


def _commit(folder: Path, message: str = "base") -> None:
    _git(folder, "add", "-A")
    _git(folder, "commit", "-qm", message)


def _edit(spec: Path, change) -> None:
    data = yaml.safe_load(spec.read_text())
    change(data)
    spec.write_text(yaml.safe_dump(data, sort_keys=False))


@pytest.fixture
def repo(workdir):
    _git(workdir, "init", "-q")
    spec = make_spec(workdir, rows=20)
    _commit(workdir)
    return spec


def _switch_model(data) -> None:
    data["model"]["name"] = "gpt-4.1"


def test_a_model_switch_shows_its_recurring_cost_change(repo, batchor_cli):
    _edit(repo, _switch_model)
    done = batchor_cli(repo.parent, "plan", repo, "--compare-to", "HEAD", "--json")
    assert done.returncode == EXIT_OK, done.stderr
    diff = json.loads(done.stdout)["cost_diff"]
    step = diff["steps"][0]
    assert step["causes"] == ["model"]
    assert (step["base_model"], step["head_model"]) == ("openai:gpt-4.1-mini", "openai:gpt-4.1")
    assert step["base_requests"] == step["head_requests"] == 20
    # gpt-4.1 costs 5x gpt-4.1-mini per token, input and output: +400 % on every run
    assert step["change_pct"] == pytest.approx(400.0, abs=0.01)
    assert diff["head_usd"] == pytest.approx(5 * diff["base_usd"])
    done = batchor_cli(repo.parent, "plan", repo, "--compare-to", "HEAD", "--format", "markdown")
    assert "| classify |" in done.stdout and "model openai:gpt-4.1-mini -> openai:gpt-4.1" in done.stdout
    assert "(+400.0 %)" in done.stdout


def test_fail_on_increase_exits_with_its_own_code_after_printing(repo, batchor_cli):
    _edit(repo, _switch_model)
    done = batchor_cli(repo.parent, "plan", repo, "--compare-to", "HEAD", "--fail-on-increase", "50")
    assert done.returncode == EXIT_COST_INCREASE == CostIncreaseError.exit_code
    assert "model openai:gpt-4.1-mini -> openai:gpt-4.1" in done.stdout and "cost_increase" in done.stderr
    assert batchor_cli(repo.parent, "plan", repo, "--compare-to", "HEAD", "--fail-on-increase", "500").returncode == 0
    assert batchor_cli(repo.parent, "plan", repo, "--fail-on-increase", "5").returncode == EXIT_USAGE
    assert batchor_cli(repo.parent, "plan", repo, "--compare-to", "HEAD", "--pilot", "5").returncode == EXIT_USAGE


def test_the_full_job_is_priced_even_when_every_row_is_cached(repo, fake):
    api.apply(repo, max_cost=1)
    again = api.plan(repo, save=False)
    assert again.header.totals.to_run == 0  # the plan's pending work: nothing
    diff = batchor.cost_diff(repo, "HEAD")
    assert diff.base_total == diff.head_total > 0 and diff.percent == 0.0
    assert diff.steps[0].causes == ()


def test_a_saved_plan_as_base_and_a_template_change(repo):
    saved = repo.parent / "base.plan"
    api.plan(repo, save=saved)

    def longer(data):
        data["steps"]["classify"]["prompt"] = "Read this review with care, then classify it. Review: {{ row.text }}"

    _edit(repo, longer)
    diff = batchor.cost_diff(repo, saved)
    assert diff.base_kind == "plan" and diff.steps[0].causes == ("template",)
    assert diff.head_total > diff.base_total
    with pytest.raises(CostIncreaseError):
        batchor.cost_diff(repo, saved, fail_on_increase=1)


def test_rows_added_and_removed_steps_are_causes(repo):
    _edit(repo, lambda data: data["input"].update(limit=10))
    _commit(repo.parent, "ten rows")

    def more(data):
        del data["input"]["limit"]
        data["steps"]["summary"] = {"prompt": "Summarise: {{ row.text }}", "output": "text"}

    _edit(repo, more)
    diff = batchor.cost_diff(repo, "HEAD")
    by_step = {s.step: s for s in diff.steps}
    assert by_step["classify"].causes == ("rows",)
    assert (by_step["classify"].base_requests, by_step["classify"].head_requests) == (10, 20)
    assert by_step["summary"].causes == ("added",) and by_step["summary"].base is None
    assert diff.rows == (10, 20) and by_step["classify"].change == pytest.approx(by_step["classify"].base)


def test_a_spec_new_in_the_revision_is_all_added(workdir):
    _git(workdir, "init", "-q")
    (workdir / "README").write_text("x")
    _commit(workdir)
    spec = make_spec(workdir, rows=5)
    diff = batchor.cost_diff(spec, "HEAD")
    assert diff.base_total == 0 and diff.head_total > 0 and diff.percent is None
    assert diff.steps[0].causes == ("added",) and diff.increased_over(1000)


def test_a_base_that_is_neither_a_plan_nor_a_revision_is_a_coded_error(repo):
    with pytest.raises(CompareBaseError) as caught:
        batchor.cost_diff(repo, "no-such-branch")
    assert caught.value.code == "compare_base_invalid" and "no-such-branch" in caught.value.message
