"""A run's record tells the truth whatever ends the process, through the real `batchor` CLI.

Requests hang at the fake (held, never answered) while a real `apply` process is stopped: by a
second Ctrl+C, by SIGTERM, or by kill -9. Each time the record says how the run ended, what it
answered and what it spent, with no traceback; and each status has its documented exit code.
"""

from __future__ import annotations

import json
import re
import signal
import time

import pytest
import yaml
from cli_helpers import Background, cli_env, wait_until
from conftest import SENTIMENT_SCHEMA, write_csv

from batchor.errors import EXIT_INTERRUPTED, exit_code_for_status

FAST, SLOW, CONCURRENCY = 20, 8, 4
SLOW_MACHINE_S = 180  # generous: a CLI start alone can take 20 s on a loaded 2-core machine


def hanging_job(folder, **limits) -> str:
    """FAST rows the fake answers at once, then SLOW rows it holds without answering."""
    rows = [{"id": f"f{i}", "text": f"quick review {i}"} for i in range(FAST)]
    rows += [{"id": f"s{i}", "text": f"stuck review {i}"} for i in range(SLOW)]
    write_csv(folder / "data.csv", rows)
    spec = {
        "version": 1,
        "name": "hang",
        "input": {"path": "data.csv", "key": "id"},
        "model": {"provider": "openai", "name": "gpt-4.1-mini", "params": {"max_tokens": 50}},
        "steps": {"classify": {"prompt": "Review: {{ row.text }}", "output": {"schema": SENTIMENT_SCHEMA}}},
        "output": {"path": "out/results.csv"},
        "limits": {"concurrency": CONCURRENCY, "max_attempts": 2, "request_timeout_s": 120, **limits},
    }
    (folder / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return "spec.yaml"


def start_hanging(workdir, fake, **env: str) -> Background:
    fake.configure(fail_matching={"stuck": "timeout"}, timeout_hold_s=300)
    spec = hanging_job(workdir)
    job = Background(workdir, "apply", spec, "--yes", env=cli_env(**env))
    wait_until(
        lambda: fake.stats()["answered"] >= FAST and fake.stats()["in_flight"] >= CONCURRENCY,
        what="the quick rows answered and the stuck ones in flight",
        timeout=SLOW_MACHINE_S,
    )
    return job


def latest_run(cli, workdir) -> dict:
    runs = cli(workdir, "runs", "--json")
    assert runs.returncode == 0, runs.stderr
    return read_json(runs.stdout)[0]


def read_json(text: str):
    return json.loads(text)


def assert_recorded(run: dict, status: str) -> None:
    assert run["status"] == status, run
    assert run["succeeded"] == FAST, run  # what it answered, counted from the stored results
    assert run["cost_usd"] > 0, run  # ... and what it spent
    assert run["paused_reason"], run


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_second_ctrl_c_while_requests_hang_exits_130_and_finishes_the_record(workdir, fake, batchor_cli):
    with start_hanging(workdir, fake) as job:
        job.process.send_signal(signal.SIGINT)
        time.sleep(0.3)  # the first signal only stops sending: the stuck calls stay in flight
        assert job.process.poll() is None
        job.process.send_signal(signal.SIGINT)
        assert job.wait(timeout=SLOW_MACHINE_S) == EXIT_INTERRUPTED, job.stderr
        assert "Traceback" not in job.stderr and "CancelledError" not in job.stderr, job.stderr
        assert "Resume with: batchor apply" in job.stderr
    assert_recorded(latest_run(batchor_cli, workdir), "interrupted")
    status = batchor_cli(workdir, "status", "--json")
    assert status.returncode == 0 and read_json(status.stdout)["status"] == "interrupted"


@pytest.mark.slow  # signals a real apply; the double Ctrl+C above stays in the default tier
def test_sigterm_while_requests_hang_cancels_them_after_the_grace(workdir, fake, batchor_cli):
    with start_hanging(workdir, fake, BATCHOR_GRACE_S="1") as job:
        job.process.send_signal(signal.SIGTERM)
        assert job.wait(timeout=SLOW_MACHINE_S) == EXIT_INTERRUPTED, job.stderr
        assert "Traceback" not in job.stderr, job.stderr
    assert_recorded(latest_run(batchor_cli, workdir), "interrupted")


@pytest.mark.slow  # kills a real apply
def test_kill_9_shows_died_with_what_it_answered_and_spent(workdir, fake, batchor_cli):
    with start_hanging(workdir, fake) as job:
        wait_until(
            lambda: latest_run(batchor_cli, workdir)["succeeded"] >= FAST, what="answers stored", timeout=SLOW_MACHINE_S
        )
        job.process.kill()
        job.wait()
    run = latest_run(batchor_cli, workdir)
    assert_recorded(run, "died")
    status = read_json(batchor_cli(workdir, "status", "--json").stdout)
    assert status["status"] == "died" and status["succeeded"] == FAST and status["cost_usd"] == run["cost_usd"]
    text = batchor_cli(workdir, "runs").stdout
    assert re.search(rf"\bdied\s+\({FAST}\)\s+\(0\)\s", text), text  # requests: it kept no end rows

    # the next apply (holding the state) finishes the dead run's record for good
    fake.configure(fail_matching={})
    again = batchor_cli(workdir, "apply", "spec.yaml", "--yes")
    assert again.returncode == 0, again.stderr
    runs = read_json(batchor_cli(workdir, "runs", "--json").stdout)
    assert [r["status"] for r in runs] == ["succeeded", "died"]
    assert runs[1]["finished_at"] is not None and runs[1]["succeeded"] == FAST
    assert runs[0]["succeeded"] == SLOW  # only the rows the dead run had not stored were sent


@pytest.mark.parametrize("case", ["succeeded", "partial", "failed", "paused"])
def test_exit_code_matches_the_recorded_status(workdir, fake, case, batchor_cli):
    faults = {
        "succeeded": {},
        "partial": {"fail_matching": {"stuck review 1": 400}},
        "failed": {"error_400": 1.0},
        "paused": {"quota_exhausted": True},
    }[case]
    fake.configure(**faults)
    spec = hanging_job(workdir)
    done = batchor_cli(workdir, "apply", spec, "--yes")
    run = latest_run(batchor_cli, workdir)
    assert run["status"] == case, (run, done.stderr)
    assert done.returncode == exit_code_for_status(case), done.stderr
    assert "Traceback" not in done.stderr


def test_rows_left_pending_never_end_succeeded(workdir, fake, batchor_cli):
    """A batch whose create is refused leaves rows without an answer: the run is not a success."""
    fake.configure(batch_create_status=400)
    spec = hanging_job(workdir)
    done = batchor_cli(workdir, "apply", spec, "--yes", "--mode", "batch")
    run = latest_run(batchor_cli, workdir)
    assert run["status"] in ("partial", "failed"), (run, done.stderr)
    assert done.returncode == exit_code_for_status(run["status"]) != 0
