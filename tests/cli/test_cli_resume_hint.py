"""The hint printed after Ctrl+C is the command the user typed, flags and all, shell-quoted: running
it as printed finishes the run on the same state with the same budget."""

from __future__ import annotations

import csv
import shlex
import signal

import pytest
from cli_helpers import Background, wait_until
from conftest import make_spec

from batchor.cli.resume import hide_password
from batchor.errors import exit_code_for_status


def statuses(path) -> list[str]:
    with open(path, newline="", encoding="utf-8") as handle:
        return [row["_status"] for row in csv.DictReader(handle)]


@pytest.mark.slow  # interrupts a real apply (the Ctrl+C test in test_cli_run_truth checks the hint is printed)
def test_resume_hint_repeats_every_flag_and_works_as_printed(workdir, fake, batchor_cli):
    spec = make_spec(workdir, rows=60, limits={"concurrency": 2, "max_attempts": 3})
    state = workdir / "my state" / "s.duckdb"  # a space: the hint must quote it
    flags = ["--max-cost", "5", "--state", str(state), "--model", "openai:gpt-4.1-mini", "--yes"]
    fake.configure(latency_ms=200)
    with Background(workdir, "apply", spec, *flags) as first:
        wait_until(lambda: fake.stats()["answered"] >= 4, what="first answers")
        first.process.send_signal(signal.SIGINT)
        assert first.wait() == 130, first.stderr
        hint = first.stderr.split("Resume with: ", 1)[1].splitlines()[0]
    words = shlex.split(hint)
    assert words[:3] == ["batchor", "apply", str(spec)]
    assert words[3:] == ["--max-cost", "5", "--yes", "--state", str(state), "--model", "openai:gpt-4.1-mini"]

    fake.configure(latency_ms=0)
    resumed = batchor_cli(workdir, *words[1:])  # as printed (bar the program name)
    assert resumed.returncode == 0, resumed.stderr
    assert statuses(workdir / "out" / "results.csv") == ["succeeded"] * 60
    assert not (workdir / ".batchor" / "state.duckdb").exists()  # the hint kept --state


def test_a_paused_run_prints_the_same_command_and_it_works_as_printed(workdir, fake, batchor_cli):
    """The hint a paused run prints is built as the Ctrl+C one (no signal needed: in this process)."""
    spec = make_spec(workdir, rows=6, limits={"concurrency": 2, "max_attempts": 3})
    state = workdir / "my state" / "s.duckdb"  # a space: the hint must quote it
    fake.configure(quota_exhausted=True)
    paused = batchor_cli(
        workdir, "apply", spec, "--max-cost", "5", "--state", state, "--model", "openai:gpt-4.1-mini", "--yes"
    )
    assert paused.returncode == exit_code_for_status("paused"), paused.stderr
    words = shlex.split(paused.stderr.split("Continue with: ", 1)[1].splitlines()[0])
    assert words == [
        "batchor",
        "apply",
        str(spec),
        "--max-cost",
        "5",
        "--yes",
        "--state",
        str(state),
        "--model",
        "openai:gpt-4.1-mini",
    ]

    fake.configure(quota_exhausted=False)
    resumed = batchor_cli(workdir, *words[1:])  # as printed (bar the program name)
    assert resumed.returncode == 0, resumed.stderr
    assert statuses(workdir / "out" / "results.csv") == ["succeeded"] * 6
    assert not (workdir / ".batchor" / "state.duckdb").exists()  # the hint kept --state


def test_a_password_in_a_state_url_is_hidden():
    assert hide_password("postgresql://ana:s3cret@db:5432/jobs") == "postgresql://ana:***@db:5432/jobs"
    assert hide_password("postgresql://db/jobs") == "postgresql://db/jobs"
