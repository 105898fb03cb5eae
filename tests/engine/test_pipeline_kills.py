"""A pipelined run (a later step sent row by row while an earlier one runs) survives kill -9 and
SIGTERM like a single step: resuming finishes every row of every step, nothing answered is asked
again beyond what was in flight, and the output is whole (real processes, real openai SDK)."""

from __future__ import annotations

import random
import signal
import time

import duckdb
import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import write_csv
from tests.engine.test_faults_and_kills import _cli

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]  # kills, restarts, every fault: CI's full tier
ROWS = 150


def _spec(folder, concurrency: int) -> str:
    write_csv(folder / "data.csv", [{"id": f"t{i}", "text": f"ticket {i}"} for i in range(ROWS)])
    spec = {
        "name": "chain",
        "input": {"path": "data.csv", "key": "id"},
        "model": {"provider": "openai", "name": "gpt-4.1-mini", "params": {"max_tokens": 30}},
        "steps": {"first": {"prompt": "First {{ row.text }}"}, "second": {"prompt": "Second {{ first }}"}},
        "output": {"path": "out.parquet"},
        "limits": {"concurrency": concurrency, "request_timeout_s": 10},
    }
    (folder / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(folder / "spec.yaml")


def _stored_by_step(folder) -> dict[str, int]:
    with duckdb.connect(str(folder / ".batchor" / "state.duckdb"), read_only=True) as db:
        return dict(db.execute("SELECT step, count(*) FROM results WHERE status = 'succeeded' GROUP BY 1").fetchall())


def _both_steps_answered(table: list[dict]) -> bool:
    return len(table) == ROWS and all(r["first"] and r["second"] and r["_status"] == "succeeded" for r in table)


@pytest.mark.slow  # kill loop
def test_kill_9_during_a_pipelined_run_then_resume_finishes_every_step_once(fake, workdir):
    fake.configure(latency_ms=40)
    concurrency = 6
    spec = _spec(workdir, concurrency)
    rng = random.Random(11)
    killed = 0
    for _ in range(8):
        proc = _cli("apply", spec, "--yes")
        time.sleep(rng.uniform(0.4, 1.4))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        proc.communicate()
    final = _cli("apply", spec, "--yes")
    _, err = final.communicate(timeout=120)
    assert final.returncode == 0, err
    assert killed >= 3
    assert _stored_by_step(workdir) == {"first": ROWS, "second": ROWS}
    assert _both_steps_answered(pq.read_table(workdir / "out.parquet").to_pylist())
    by_prompt = fake.stats()["by_prompt"]
    assert len(by_prompt) == 2 * ROWS
    duplicates = sum(n - 1 for n in by_prompt.values())
    assert duplicates <= killed * concurrency * 2, (duplicates, killed)  # in flight or unflushed at a kill


def test_sigterm_during_a_pipelined_run_keeps_both_steps_and_resume_sends_only_the_rest(fake, workdir):
    fake.configure(latency_ms=60)
    spec = _spec(workdir, concurrency=4)
    proc = _cli("apply", spec, "--yes")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and fake.stats()["answered"] < ROWS * 2 // 3:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    kept = _stored_by_step(workdir)
    assert kept.get("second", 0) > 0 and kept["first"] < ROWS  # stopped mid-way, both steps under way
    fake.reset()
    final = _cli("apply", spec, "--yes")
    _, err = final.communicate(timeout=120)
    assert final.returncode == 0, err
    assert fake.stats()["answered"] == 2 * ROWS - kept["first"] - kept["second"]  # only the rest was sent
    assert _both_steps_answered(pq.read_table(workdir / "out.parquet").to_pylist())
