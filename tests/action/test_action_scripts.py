"""The composite action's steps (action/*.sh) run here as the runner runs them, against a scratch
user repository (a spec, a CSV, a schema) with this checkout's `batchor`: what each step decides,
the markdown comment it writes, the sticky comment (a stand-in `gh` records GitHub's side), the
fork and no-`gh` fallback to the job summary, and apply against the fake provider server."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from action_helpers import make_user_repo, outputs, run_script, runner_files, this_batchor

from batchor import errors

EXIT_CODES = sorted({value for name, value in vars(errors).items() if name.startswith("EXIT_")})


@pytest.fixture
def repo(tmp_path):
    return make_user_repo(tmp_path / "repo")


def setup(tmp_path, **env: str) -> tuple[dict[str, str], dict[str, str]]:
    files = runner_files(tmp_path / "runner")
    done = run_script("setup.sh", tmp_path, tmp_path / "bin", {**files, **env})
    assert done.returncode == 0, done.stderr
    return outputs(files["GITHUB_OUTPUT"]), outputs(files["GITHUB_ENV"])


@pytest.mark.parametrize(
    ("event", "ref", "command", "apply", "plan"),
    [
        ("pull_request", "refs/pull/7/merge", "auto", "false", "true"),
        ("push", "refs/heads/main", "auto", "true", "true"),
        ("workflow_dispatch", "refs/heads/main", "auto", "true", "true"),
        ("push", "refs/heads/feature", "auto", "false", "true"),
        ("push", "refs/heads/main", "plan", "false", "true"),
        ("push", "refs/heads/main", "validate", "false", "false"),
        ("pull_request", "refs/pull/7/merge", "apply", "true", "true"),
    ],
)
def test_setup_applies_only_on_the_default_branch_unless_told(tmp_path, event, ref, command, apply, plan):
    env = {"GITHUB_EVENT_NAME": event, "GITHUB_REF": ref, "BATCHOR_COMMAND": command, "BATCHOR_DEFAULT_BRANCH": "main"}
    out, _ = setup(tmp_path, **env)
    assert (out["apply"], out["plan"]) == (apply, plan)


def test_setup_caches_duckdb_state_and_hands_a_postgresql_url_to_batchor(tmp_path):
    out, env = setup(tmp_path)
    assert (out["cache"], out["cache-path"]) == ("true", ".batchor") and env == {}
    url = "postgresql://ci:secret@db.internal/batchor"
    out, env = setup(tmp_path, BATCHOR_STATE_INPUT=url)
    assert out["cache"] == "false" and env == {"BATCHOR_STATE": url}


def test_setup_tells_a_fork_from_the_repository(tmp_path):
    out, _ = setup(tmp_path, BATCHOR_PR_NUMBER="7", BATCHOR_PR_REPO="someone/reviews")
    assert (out["pr"], out["fork"]) == ("7", "true")
    out, _ = setup(tmp_path, BATCHOR_PR_NUMBER="7", BATCHOR_PR_REPO="acme/reviews")
    assert out["fork"] == "false"


def test_setup_refuses_an_unknown_command(tmp_path):
    files = runner_files(tmp_path / "runner")
    done = run_script("setup.sh", tmp_path, tmp_path / "bin", {**files, "BATCHOR_COMMAND": "deploy"})
    assert done.returncode == 64 and "auto, validate, plan or apply" in done.stderr


def test_the_plan_step_writes_the_comment_and_without_gh_the_summary_gets_it(repo, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("BATCHOR_STATE", raising=False)
    bin_dir = this_batchor(tmp_path / "bin")
    files = runner_files(tmp_path / "runner")
    comment = tmp_path / "runner" / "plan.md"
    env = {**files, "BATCHOR_SPECS": "specs/*.yaml", "BATCHOR_COMMENT_FILE": str(comment)}
    done = run_script("validate.sh", repo, bin_dir, env)
    assert done.returncode == 0 and "ok  specs/labels.yaml" in done.stdout, done.stderr
    done = run_script("plan.sh", repo, bin_dir, env)
    assert done.returncode == 0, done.stderr
    text = comment.read_text()
    assert text.startswith("## batchor plan\n") and "labels" in text and "gpt-4.1-mini" in text
    assert "3 to run" in text or "| 3 |" in text, text
    assert "specs/labels.yaml has not run on the default branch yet" in text
    assert "**API keys an apply needs are not set here:** 1 API key(s) not set: OPENAI_API_KEY" in text
    done = run_script("comment.sh", repo, bin_dir, {**env, "BATCHOR_PR_NUMBER": "7", "GH_TOKEN": "t"})
    assert done.returncode == 0 and "job summary only: gh is not installed" in done.stdout
    assert Path(files["GITHUB_STEP_SUMMARY"]).read_text() == text


def test_apply_names_missing_keys_before_any_call_then_runs_within_the_budget(repo, tmp_path, fake, monkeypatch):
    monkeypatch.delenv("BATCHOR_STATE", raising=False)
    bin_dir = this_batchor(tmp_path / "bin")
    env = {**runner_files(tmp_path / "runner"), "BATCHOR_SPECS": "specs/*.yaml", "BATCHOR_BUDGET": "1"}
    done = run_script("apply.sh", repo, bin_dir, {**env, "OPENAI_API_KEY": ""})
    assert done.returncode == 1 and "OPENAI_API_KEY" in done.stderr and "pass the missing API keys" in done.stdout
    assert fake.stats()["requests"] == 0 and not (repo / "out").exists()
    done = run_script("apply.sh", repo, bin_dir, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len((repo / "out" / "labels.csv").read_text().splitlines()) == 4
    assert fake.stats()["requests"] == 3
    assert (repo / ".batchor" / "state.duckdb").is_file()  # what the cache step saves


def stand_in_gh(bin_dir: Path, store: Path) -> None:
    """A `gh api` that keeps one issue's comments in a JSON file, as GitHub would: GET lists them,
    POST adds one (a new id), PATCH replaces a body; other calls fail."""
    store.write_text("[]")
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "gh"
    script.write_text(
        f"""#!/usr/bin/env python3
import json, sys
store = {str(store)!r}
args = sys.argv[1:]
comments = json.load(open(store))
method = args[args.index("--method") + 1] if "--method" in args else "GET"
body = next((a.split("=@", 1)[1] for a in args if a.startswith("body=@")), None)
if method == "GET":
    marker = args[args.index("--jq") + 1].split('startswith("')[1].split('")')[0]
    print("\\n".join(str(c["id"]) for c in comments if c["body"].startswith(marker)))
elif method == "POST":
    comments.append({{"id": 100 + len(comments), "body": open(body).read()}})
elif method == "PATCH":
    target = int(args[args.index("--method") + 2].rsplit("/", 1)[1])
    next(c for c in comments if c["id"] == target)["body"] = open(body).read()
json.dump(comments, open(store, "w"))
"""
    )
    script.chmod(0o755)


def test_the_comment_is_posted_once_then_updated_in_place(tmp_path):
    bin_dir, store = tmp_path / "bin", tmp_path / "comments.json"
    stand_in_gh(bin_dir, store)
    comment = tmp_path / "plan.md"
    env = {"BATCHOR_COMMENT_FILE": str(comment), "BATCHOR_PR_NUMBER": "7", "GH_TOKEN": "t"}
    for text in ("## batchor plan\nfirst push\n", "## batchor plan\nsecond push\n"):
        comment.write_text(text)
        done = run_script("comment.sh", tmp_path, bin_dir, {**env, **runner_files(tmp_path / "runner")}, gh=True)
        assert done.returncode == 0, done.stderr
    comments = json.loads(store.read_text())
    assert len(comments) == 1 and comments[0]["body"].endswith("second push\n")
    assert comments[0]["body"].startswith("<!-- batchor-plan-comment -->\n")


def test_a_fork_gets_the_job_summary_and_no_call(tmp_path):
    bin_dir, store = tmp_path / "bin", tmp_path / "comments.json"
    stand_in_gh(bin_dir, store)
    (tmp_path / "plan.md").write_text("## batchor plan\n")
    files = runner_files(tmp_path / "runner")
    env = {**files, "BATCHOR_COMMENT_FILE": str(tmp_path / "plan.md"), "BATCHOR_PR_NUMBER": "7", "GH_TOKEN": "t"}
    done = run_script("comment.sh", tmp_path, bin_dir, {**env, "BATCHOR_FORK": "true"}, gh=True)
    assert done.returncode == 0 and "a pull request from a fork" in done.stdout
    assert json.loads(store.read_text()) == [] and Path(files["GITHUB_STEP_SUMMARY"]).read_text() == "## batchor plan\n"


def stand_in_batchor(bin_dir: Path, stderr: str = "", **codes: int) -> Path:
    """A `batchor` that exits with codes[command] (0 otherwise): each exit code, without a run."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    cases = "".join(f"  {command}) exit {code} ;;\n" for command, code in codes.items())
    (bin_dir / "batchor").write_text(f"#!/bin/sh\necho '{stderr}' >&2\ncase \"$1\" in\n{cases}esac\nexit 0\n")
    (bin_dir / "batchor").chmod(0o755)
    return bin_dir


def mapped(name: str, repo: Path, tmp_path: Path, stderr: str = "", **codes: int) -> int:
    bin_dir = stand_in_batchor(tmp_path / "stand-in", stderr, **codes)
    env = {"BATCHOR_COMMENT_FILE": str(tmp_path / "plan.md"), "BATCHOR_BUDGET": "5"}
    return run_script(name, repo, bin_dir, {**env, **runner_files(tmp_path / "runner")}).returncode


@pytest.mark.parametrize("code", EXIT_CODES)
def test_apply_maps_each_exit_code(repo, tmp_path, code):
    # in flight (7) and interrupted (130) resume on the next run; everything else but 0 fails the job
    passes = code in (errors.EXIT_OK, errors.EXIT_IN_FLIGHT, errors.EXIT_INTERRUPTED)
    assert (mapped("apply.sh", repo, tmp_path, apply=code) == 0) == passes


@pytest.mark.parametrize("code", EXIT_CODES)
def test_plan_maps_each_exit_code(repo, tmp_path, code):
    # on a pull request pending work (2) is the point and a plan over budget (4) only warns
    passes = code in (errors.EXIT_OK, errors.EXIT_PENDING, errors.EXIT_COST_LIMIT)
    assert (mapped("plan.sh", repo, tmp_path, plan=code) == 0) == passes


@pytest.mark.parametrize("code", EXIT_CODES)
def test_check_maps_each_exit_code(repo, tmp_path, code):
    # failed checks on the stored answers (9) warn on a PR; the default branch's apply is the gate
    passes = code in (errors.EXIT_OK, errors.EXIT_CHECKS_FAILED)
    assert (mapped("plan.sh", repo, tmp_path, check=code) == 0) == passes


def _commit_all(repo: Path) -> str:
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True, capture_output=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=repo, check=True, capture_output=True)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()


def test_on_a_pull_request_the_comment_shows_the_full_jobs_cost_diff_and_can_gate_it(repo, tmp_path, monkeypatch):
    monkeypatch.delenv("BATCHOR_STATE", raising=False)
    base = _commit_all(repo)
    spec = repo / "specs" / "labels.yaml"
    spec.write_text(spec.read_text().replace("gpt-4.1-mini", "gpt-4.1"))  # the PR: a 5x dearer model
    bin_dir = this_batchor(tmp_path / "bin")
    comment = tmp_path / "runner" / "plan.md"
    env = {**runner_files(tmp_path / "runner"), "BATCHOR_COMMENT_FILE": str(comment), "BATCHOR_COMPARE_TO": base}
    done = run_script("plan.sh", repo, bin_dir, env)
    assert done.returncode == 0, done.stderr
    text = comment.read_text()
    assert "| label |" in text and "model openai:gpt-4.1-mini -> openai:gpt-4.1" in text and "(+400.0 %)" in text
    done = run_script("plan.sh", repo, bin_dir, {**env, "BATCHOR_FAIL_ON_INCREASE": "25"})
    assert done.returncode == 1 and "costs more than 25 % above the base" in done.stdout
    assert "(fail-on-increase)" in comment.read_text()
    done = run_script("plan.sh", repo, bin_dir, {**env, "BATCHOR_COMPARE_TO": "0" * 40})
    assert done.returncode == 0 and "no cost diff" in done.stdout and "Full-job cost" not in comment.read_text()
