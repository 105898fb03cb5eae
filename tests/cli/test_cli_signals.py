"""Interrupting and locking real `batchor apply` processes: Ctrl+C keeps finished work and the
next apply resumes without asking twice; a second apply on the same state is refused."""

from __future__ import annotations

import csv
import signal

import pytest
from cli_helpers import Background, run_cli, wait_until
from conftest import make_spec

pytestmark = pytest.mark.slow  # signals, kills or large files: CI's full tier

CONCURRENCY = 4


def statuses(path) -> list[str]:
    with open(path, newline="", encoding="utf-8") as handle:
        return [row["_status"] for row in csv.DictReader(handle)]


def test_interrupt_then_resume_answers_every_row_once(workdir, fake):
    rows = 200
    spec = make_spec(workdir, rows=rows, limits={"concurrency": CONCURRENCY, "max_attempts": 3})
    fake.configure(latency_ms=200)
    with Background(workdir, "apply", spec, "--yes") as first:
        wait_until(lambda: fake.stats()["answered"] >= 3 * CONCURRENCY, what="first answers")
        first.process.send_signal(signal.SIGINT)
        assert first.wait() == 130, first.stderr
        assert f"Resume with: batchor apply {spec}" in first.stderr
    saved = statuses(workdir / "out" / "results.csv")
    done_first = saved.count("succeeded")
    assert 0 < done_first < rows and saved.count("pending") == rows - done_first

    fake.configure(latency_ms=0)
    second = run_cli(workdir, "apply", spec, "--yes")
    assert second.returncode == 0, second.stderr
    assert statuses(workdir / "out" / "results.csv") == ["succeeded"] * rows
    by_prompt = fake.stats()["by_prompt"]
    assert len(by_prompt) == rows
    # only requests in flight at the interrupt may have been asked again
    assert sum(n - 1 for n in by_prompt.values()) <= CONCURRENCY
    assert max(by_prompt.values()) <= 2


def test_second_apply_on_the_same_state_is_refused(workdir, fake):
    # 30 s of work at one request a second: the first apply is surely still running when the
    # second one (a fresh process that plans first) reaches the lock
    spec = make_spec(workdir, rows=30, limits={"concurrency": 1, "max_attempts": 3})
    fake.configure(latency_ms=1000)
    with Background(workdir, "apply", spec, "--yes") as first:
        wait_until(lambda: fake.stats()["requests"] >= 1, what="the first apply to start sending")
        second = run_cli(workdir, "apply", spec, "--yes")
        assert second.returncode == 8, second.stderr
        assert "error [state_locked]" in second.stderr
        assert f"pid {first.process.pid}" in second.stderr
        assert first.process.poll() is None  # the first one was not disturbed
        first.process.send_signal(signal.SIGINT)
        assert first.wait() == 130
    fake.configure(latency_ms=0)
    assert run_cli(workdir, "apply", spec, "--yes").returncode == 0  # the lock went with its holder
