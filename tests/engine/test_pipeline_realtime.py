"""Row-level pipelining in realtime mode: a later step starts on a row as soon as that row's
upstream answers are stored, with the same answers and counts as wave by wave (real openai SDK
against the fake provider; order is read from the fake's answer log, never from timings)."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
import yaml

import batchor
from tests.conftest import write_csv
from tests.fakes.answers import prompt_key

ROWS = 40
FAILING = {"First ticket 5": 400, "First ticket 25": 400}  # `first` fails on rows 5 and 25


def _spec(folder, rows: int = ROWS, **changes) -> str:
    write_csv(folder / "data.csv", [{"id": f"t{i}", "text": f"ticket {i}"} for i in range(rows)])
    spec = {
        "name": "chain",
        "input": {"path": "data.csv", "key": "id"},
        "model": {"provider": "openai", "name": "gpt-4.1-mini", "params": {"max_tokens": 30}},
        "steps": {
            "first": {"prompt": "First {{ row.text }}"},
            "second": {"prompt": "Second {{ first }}", "when": "not row.text.endswith('7')"},
            "third": {"prompt": "Third {{ second }} {{ first }}"},
        },
        "output": {"path": "out.parquet"},
        "limits": {"concurrency": 4},
        **changes,
    }
    (folder / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(folder / "spec.yaml")


def _answer_order(fake) -> list[str]:
    """Prompt keys in the order the fake first answered them."""
    return list(fake.stats()["by_prompt"])


def _apply(spec: str, **options) -> dict:
    """Apply and return the run's final counts (the `run_finished` event: total, succeeded, ...)."""
    events = []
    result = batchor.apply(spec, max_cost=1, on_event=events.append, **options)
    finished = next(e.data for e in events if e.type == "run_finished")
    return {k: finished[k] for k in ("status", "total", "succeeded", "failed", "cached", "skipped")} | {
        "result": result
    }


def _counts(run: dict) -> dict:
    return {k: v for k, v in run.items() if k != "result"}


def test_second_step_starts_before_the_first_step_ends(fake, workdir):
    # Answers are stored about every 0.25 s; at 30 ms per request, 2 at a time, `first` takes
    # ~0.6 s, so its early rows are stored (and `second` sent for them) before its last request.
    fake.configure(latency_ms=30)
    steps = {"first": {"prompt": "First {{ row.text }}"}, "second": {"prompt": "Second {{ first }}"}}
    spec = _spec(workdir, steps=steps, limits={"concurrency": 2})
    result = batchor.apply(spec, max_cost=1)
    assert result.status == "succeeded" and result.succeeded == 2 * ROWS
    order = _answer_order(fake)
    first = {prompt_key(f"First ticket {i}") for i in range(ROWS)}
    last_first = max(i for i, key in enumerate(order) if key in first)
    first_second = min(i for i, key in enumerate(order) if key not in first)
    assert first_second < last_first  # `second` was answered for early rows while `first` still ran


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_pipelined_and_wave_runs_give_the_same_answers_and_counts(fake, workdir):
    fake.configure(latency_ms=30, fail_matching=FAILING)
    waves_dir = workdir / "waves"
    waves_dir.mkdir()
    wave_spec = _spec(waves_dir, limits={"concurrency": 2})
    waves = _apply(wave_spec, limits={"pipeline": False}, state=str(waves_dir / "s.duckdb"))
    answered_first = [prompt_key(f"First ticket {i}") for i in range(ROWS) if i not in (5, 25)]
    assert set(_answer_order(fake)[: len(answered_first)]) == set(answered_first)  # waves: all of first, then the rest
    fake.reset()
    fake.configure(latency_ms=30, fail_matching=FAILING)
    pipelined = _apply(_spec(workdir, limits={"concurrency": 2}))
    order = _answer_order(fake)
    assert set(order[: len(answered_first)]) != set(answered_first)  # this time the steps overlapped

    assert _counts(pipelined) == _counts(waves)
    assert pipelined["status"] == "partial" and pipelined["skipped"] > 0
    rows = pq.read_table(workdir / "out.parquet").to_pylist()
    assert rows == pq.read_table(waves_dir / "out.parquet").to_pylist()
    by_id = {r["id"]: r for r in rows}
    assert by_id["t5"]["second"] is None and by_id["t5"]["_status"] == "failed"
    assert by_id["t7"]["second"] is None and by_id["t7"]["third"] is None  # `when` false, then blocked
    assert by_id["t8"]["third"].startswith("echo: Third echo: Second")

    fake.reset()  # nothing new: the pipelined stages send nothing, and the 400s stay failed
    again = batchor.apply(_spec(workdir), max_cost=1)
    assert fake.stats()["requests"] == 0 and again.succeeded == 0
    retried = batchor.apply(_spec(workdir), max_cost=1, retry_failed=True)
    assert fake.stats()["requests"] == 2 and retried.succeeded == 0  # only the failed rows, asked for


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_appended_rows_run_only_their_own_chain(fake, workdir):
    batchor.apply(_spec(workdir, rows=20), max_cost=1)
    fake.reset()
    again = batchor.apply(_spec(workdir, rows=20), max_cost=1)
    assert fake.stats()["requests"] == 0 and again.succeeded == 0
    more = batchor.apply(_spec(workdir, rows=25), max_cost=1)  # rows 20-24: 5 + 5 (+ `when`) + 5
    sent = 5 + sum(1 for i in range(20, 25) if i % 10 != 7) * 2
    assert fake.stats()["requests"] == sent and more.succeeded == sent


def test_shared_answers_are_sent_once_and_counted_like_waves(fake, workdir):
    steps = {
        "first": {"prompt": "First {{ row.text[:8] }}"},  # many rows share one request
        "second": {"prompt": "Second {{ first }}"},
    }
    waves_dir = workdir / "waves"
    waves_dir.mkdir()
    waves = _apply(_spec(waves_dir, steps=steps), limits={"pipeline": False}, state=str(waves_dir / "s.duckdb"))
    fake.reset()
    pipelined = _apply(_spec(workdir, steps=steps))
    assert _counts(pipelined) == _counts(waves)
    assert set(fake.stats()["by_prompt"].values()) == {1}
