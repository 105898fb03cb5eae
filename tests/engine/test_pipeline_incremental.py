"""Pipelines re-run only what changed, counted at the fake provider (real openai SDK)."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
import yaml

import batchor
from tests.conftest import write_csv

TRIAGE = {
    "type": "object",
    "properties": {"kind": {"type": "string", "enum": ["a", "b"]}},
    "required": ["kind"],
    "additionalProperties": False,
}


def _spec(folder, rows: int, reply_prompt: str = "Answer {{ row.text }} ({{ route.kind }})") -> str:
    write_csv(folder / "data.csv", [{"id": f"t{i}", "text": f"ticket {i}"} for i in range(rows)])
    spec = {
        "name": "pipe",
        "input": {"path": "data.csv", "key": "id"},
        "model": {"provider": "openai", "name": "gpt-4.1-mini", "params": {"max_tokens": 30}},
        "steps": {
            "triage": {
                "model": {"name": "gpt-4.1-nano"},
                "prompt": "Triage {{ row.text }}",
                "output": {"schema": TRIAGE},
            },
            "route": {"sql": "SELECT _row_key, triage.kind AS kind FROM rows WHERE triage.kind = 'a'"},
            "reply": {"prompt": reply_prompt, "output": "text"},
        },
        "output": {"path": "out.parquet"},
        "limits": {"concurrency": 8},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(path)


def _requests(fake) -> dict[str, int]:
    return fake.stats()["by_endpoint"]


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_append_rows_and_edit_one_step_rerun_only_what_they_must(fake, workdir):
    spec = _spec(workdir, rows=30)
    first = batchor.apply(spec, max_cost=1)
    assert first.status == "succeeded"
    table = pq.read_table(workdir / "out.parquet").to_pylist()
    routed = [r for r in table if r["triage.kind"] == "a"]
    assert routed and len(routed) < 30  # the SQL step filtered some rows out
    assert all(r["reply"] for r in routed)
    assert all(r["reply"] is None and r["route.kind"] is None for r in table if r["triage.kind"] == "b")
    calls_first = fake.stats()["requests"]
    assert calls_first == 30 + len(routed)

    fake.reset()
    again = batchor.apply(spec, max_cost=1)
    assert fake.stats()["requests"] == 0 and again.succeeded == 0

    spec = _spec(workdir, rows=40)  # append 10 rows: only they run (triage + their replies)
    plan = batchor.plan(spec)
    assert plan.steps["triage"]["to_run"] == 10 and plan.steps["triage"]["cached"] == 30
    batchor.apply(spec, max_cost=1)
    table = pq.read_table(workdir / "out.parquet").to_pylist()
    new_routed = [r for r in table[30:] if r["triage.kind"] == "a"]
    assert fake.stats()["requests"] == 10 + len(new_routed)

    fake.reset()  # edit only the last step: triage stays cached, every reply runs again
    spec = _spec(workdir, rows=40, reply_prompt="Reply politely to {{ row.text }} ({{ route.kind }})")
    plan = batchor.plan(spec)
    assert plan.steps["triage"]["to_run"] == 0
    routed_now = sum(r["triage.kind"] == "a" for r in table)
    assert plan.steps["reply"]["to_run"] == routed_now
    batchor.apply(spec, max_cost=1)
    stats = fake.stats()
    assert stats["requests"] == routed_now


def test_detailed_exitcode_tells_ci_whether_work_is_pending(fake, workdir, batchor_cli):
    spec = _spec(workdir, rows=12)
    args = ["plan", spec, "--detailed-exitcode", "--format", "markdown"]
    pending = batchor_cli(workdir, *args)
    assert pending.returncode == 2, pending.stderr
    assert "| triage |" in pending.stdout
    batchor.apply(spec, max_cost=1)
    done = batchor_cli(workdir, *args)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_refresh_forces_new_answers_for_one_step(fake, workdir):
    spec = _spec(workdir, rows=10)
    batchor.apply(spec, max_cost=1)
    plan = batchor.plan(spec, refresh={"triage"})
    assert plan.steps["triage"]["to_run"] == 10
    fake.reset()
    batchor.apply(spec, max_cost=1, refresh={"triage"})
    assert fake.stats()["by_endpoint"]  # triage was asked again
    assert fake.stats()["requests"] >= 10
