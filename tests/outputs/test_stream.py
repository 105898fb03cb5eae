"""Streamed JSONL outputs (outputs/stream.py): each finished row is in the file before the state
stores it, handed to `on_row` and `--json` once, cached rows included; the run's end leaves the
export's own file; a stream asked of an output that cannot stream is refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import batchor
from batchor.errors import OutputStreamError
from tests.conftest import write_csv

ROWS = 12


def _spec(folder: Path, output: str = "out.jsonl", rows: int = ROWS, **out: object) -> Path:
    write_csv(folder / "data.csv", [{"id": f"t{i}", "text": f"ticket {i}"} for i in range(rows)])
    spec = {
        "name": "streamed",
        "input": {"path": "data.csv", "key": "id"},
        "model": {"provider": "openai", "name": "gpt-4.1-mini", "params": {"max_tokens": 30}},
        "steps": {"first": {"prompt": "First {{ row.text }}"}, "second": {"prompt": "Second {{ first }}"}},
        "output": {"path": output, **out},
        "limits": {"concurrency": 2},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_row_is_in_the_file_when_it_is_handed_out_and_the_end_is_the_export(fake, workdir):
    spec = _spec(workdir)
    seen: list[tuple[str, bool]] = []

    def on_row(row: dict) -> None:  # called before the state stores the row's answers
        in_file = {r["_row_key"]: r for r in _lines(workdir / "out.jsonl")}
        seen.append((row["_row_key"], in_file.get(row["_row_key"]) == row))

    result = batchor.apply(spec, max_cost=1, on_row=on_row, progress=False)
    assert result.status == "succeeded"
    assert sorted(k for k, _ in seen) == sorted(f"t{i}" for i in range(ROWS))  # each row once
    assert all(present for _, present in seen)
    final = _lines(workdir / "out.jsonl")
    assert [r["_row_key"] for r in final] == [f"t{i}" for i in range(ROWS)]  # input order at the end
    exported = workdir / "exported.jsonl"
    batchor.export(exported, result.run_id)
    assert (workdir / "out.jsonl").read_bytes() == exported.read_bytes()


def test_cached_rows_reach_on_row_on_a_later_run_and_nothing_is_asked_again(fake, workdir):
    spec = _spec(workdir)
    batchor.apply(spec, max_cost=1, progress=False)
    asked = fake.stats()["answered"]
    rows: list[dict] = []
    events: list[dict] = []
    batchor.apply(spec, max_cost=1, on_row=rows.append, on_event=lambda e: events.append(e.to_dict()), progress=False)
    assert fake.stats()["answered"] == asked
    assert sorted(r["_row_key"] for r in rows) == sorted(f"t{i}" for i in range(ROWS))
    finished = [e for e in events if e["event"] == "row_finished"]
    assert len(finished) == ROWS and all(e["cached"] for e in finished)


def test_a_run_starts_from_the_state_not_from_what_a_killed_run_left(fake, workdir):
    spec = _spec(workdir)
    batchor.apply(spec, max_cost=1, progress=False)
    answered = (workdir / "out.jsonl").read_text().splitlines()
    # A killed run's file: a duplicated line, a line the state never stored, a torn last line.
    (workdir / "out.jsonl").write_text("\n".join(answered + answered[:2] + ['{"_row_key": "ghost"}', '{"id": "t']))
    during: list[list[str]] = []  # the file as the run hands out its first row (before its end)
    batchor.apply(
        spec,
        max_cost=1,
        on_row=lambda r: during.append((workdir / "out.jsonl").read_text().splitlines()),
        progress=False,
    )
    assert during[0] == answered
    assert (workdir / "out.jsonl").read_text().splitlines() == answered


def test_json_apply_prints_a_row_finished_event_per_row(workdir):
    spec = _spec(workdir, output="out.csv")  # the events do not need a streamed file
    done = subprocess.run(
        [sys.executable, "-m", "batchor.cli.main", "apply", str(spec), "--mock", "--yes", "--json"],
        capture_output=True,
        text=True,
        cwd=workdir,
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    finished = [e for e in events if e["event"] == "row_finished"]
    assert sorted(e["row_key"] for e in finished) == sorted(f"t{i}" for i in range(ROWS))
    assert all(e["status"] == "succeeded" and e["row"]["second"] for e in finished)


@pytest.mark.parametrize("output", ["out.csv", "out.parquet"])
def test_stream_true_on_an_output_that_cannot_stream_is_refused(workdir, output):
    spec = _spec(workdir, output=output, stream=True)
    with pytest.raises(OutputStreamError) as caught:
        batchor.plan(spec, mock=True)
    assert caught.value.code == "output_stream_unsupported" and "JSONL" in caught.value.message


def test_stream_false_writes_the_file_only_at_the_end(workdir):
    spec = _spec(workdir, stream=False)
    sizes: list[bool] = []
    batchor.apply(spec, mock=True, on_row=lambda r: sizes.append((workdir / "out.mock.jsonl").exists()), progress=False)
    assert sizes and not any(sizes)
    assert len(_lines(workdir / "out.mock.jsonl")) == ROWS


def _answered_rows(folder: Path) -> set[str]:
    """Rows whose every step the state holds a succeeded answer for."""
    import duckdb

    with duckdb.connect(str(folder / ".batchor" / "state.duckdb"), read_only=True) as db:
        found = db.execute(
            "SELECT j.row_key FROM job_requests j JOIN results r USING (request_key) WHERE r.status = 'succeeded' "
            "GROUP BY j.row_key HAVING count(DISTINCT j.step) = 2"
        ).fetchall()
    return {k for (k,) in found}


@pytest.mark.slow  # real processes killed mid-run
@pytest.mark.timeout(300)
def test_kill_9_leaves_a_valid_stream_with_every_answered_row_and_resume_adds_no_duplicate(fake, workdir):
    import os
    import signal
    import time

    fake.configure(latency_ms=40)
    spec = _spec(workdir, rows=150)
    env = {**os.environ, "PYTHONPATH": str(Path(batchor.__file__).parent.parent)}
    command = [sys.executable, "-m", "batchor.cli.main", "apply", str(spec), "--yes"]
    for pause in (1.2, 1.6, 0.9):
        proc = subprocess.Popen(command, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        start = fake.stats()["answered"]
        while time.monotonic() < deadline and fake.stats()["answered"] < start + 50:
            time.sleep(0.05)
        time.sleep(pause / 4)
        assert proc.poll() is None, "the run ended before it was killed"
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        lines = (workdir / "out.jsonl").read_text().splitlines()
        rows = [json.loads(line) for line in lines]  # every line is whole, valid JSON
        keys = [r["_row_key"] for r in rows]
        assert keys and len(keys) == len(set(keys))  # rows answered before the kill, none twice
        assert _answered_rows(workdir) <= set(keys)  # every row the state answered is in the file
        assert all(r["_status"] == "succeeded" and r["second"] for r in rows)
    final = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=200)
    assert final.returncode == 0, final.stderr
    keys = [r["_row_key"] for r in _lines(workdir / "out.jsonl")]
    assert keys == [f"t{i}" for i in range(150)]


def test_a_batch_run_streams_the_rows_of_each_collected_batch(fake, workdir):
    fake.configure(batch_polls=1, batch_seconds=0.0)
    spec = _spec(workdir)
    seen: list[bool] = []

    def on_row(row: dict) -> None:
        in_file = {r["_row_key"] for r in _lines(workdir / "out.jsonl")}
        seen.append(row["_row_key"] in in_file)

    result = batchor.apply(spec, mode="batch", max_cost=1, on_row=on_row, progress=False)
    assert result.status == "succeeded"
    assert fake.stats()["by_endpoint"].get("openai.chat_completions", 0) == 0  # answered in batches
    assert len(seen) == ROWS and all(seen)


def test_rows_without_a_streamed_file_are_handed_out_together_at_most_once_a_second(fake, workdir):
    """Each hand-out runs the export's query: without a file to keep whole at a kill, the rows
    of several flushes go out together (every HAND_OUT_EVERY_S, and at the close)."""
    import pyarrow as pa

    from batchor import api
    from batchor.outputs.stream import HAND_OUT_EVERY_S, RowStream
    from batchor.state import open_state

    spec = _spec(workdir, output="out.csv", rows=6)
    one_step = yaml.safe_load(spec.read_text())
    del one_step["steps"]["second"]
    spec.write_text(yaml.safe_dump(one_step, sort_keys=False))
    batchor.apply(spec, max_cost=1, progress=False)
    plan = api.plan(str(spec), save=False)
    store = open_state(str(workdir / ".batchor" / "state.duckdb"))
    keys = pa.Table.from_batches(list(plan.iter_batches(["__req.first.key"]))).column(0).combine_chunks()
    stored = store.results_for_keys(keys)
    results = stored.append_column("error_code", pa.nulls(6, pa.string())).append_column(
        "error", pa.nulls(6, pa.string())
    )
    now, handed = [0.0], []
    stream = RowStream(
        plan, store, None, lambda rows, cached: handed.append(sorted(r["_row_key"] for r in rows)), clock=lambda: now[0]
    )
    stream.stored(results.slice(0, 2))
    now[0] = HAND_OUT_EVERY_S / 2
    stream.stored(results.slice(2, 2))
    assert handed == []
    now[0] = HAND_OUT_EVERY_S
    stream.stored(results.slice(4, 1))
    assert handed == [sorted(f"t{i}" for i in range(5))]
    stream.stored(results.slice(5, 1))
    stream.close()
    assert handed[1:] == [["t5"]]
