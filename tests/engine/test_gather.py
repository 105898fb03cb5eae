"""Gathering neighbours' answers: a step below a split reads the answers an earlier step gave the
chunks around its own (`gather:`), in realtime and in a Batch API, and the plan counts those
tokens (real openai SDK against the fake provider)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

import batchor
from batchor.errors import SpecError
from batchor.plan.tokens import get_counter
from batchor.schema.sample_values import sample_value
from tests.cli.cli_helpers import cli_env
from tests.conftest import write_csv
from tests.engine.test_reduce import _answered
from tests.fakes.answers import prompt_key

NOTES = {
    "type": "object",
    "properties": {"point": {"type": "string"}},
    "required": ["point"],
    "additionalProperties": False,
}
REFINE = (
    "Refine part {{ chunks.n }}: {{ notes.point }}\n"
    "before: {{ gather.notes.before | map(attribute='point') | join(' / ') }}\n"
    "after: {{ gather.notes.after | map(attribute='point') | join(' / ') }}"
)


def _doc(name: str, paragraphs: int) -> str:
    return "\n\n".join(
        f"{name} paragraph {i}: " + "the terms of the lease and its renewal " * 4 for i in range(paragraphs)
    )


def _spec(folder: Path, refine: dict[str, Any] | None = None, mode: str = "realtime") -> str:
    docs = [{"doc": "d1", "body": _doc(f"d1 {mode}", 8)}, {"doc": "d2", "body": _doc(f"d2 {mode}", 3)}]
    write_csv(folder / "docs.csv", docs)
    spec = {
        "name": "gathered",
        "input": {"path": "docs.csv", "key": "doc"},
        "model": {"provider": "openai", "name": "gpt-4.1-mini", "params": {"max_tokens": 30}},
        "steps": {
            "chunks": {"split": "{{ row.body }}", "chunk_tokens": 80, "delimiter": "\n\n"},
            "notes": {"prompt": "Part {{ chunks.n }}: {{ chunks.text }}", "output": {"schema": NOTES}},
            "refine": refine or {"gather": {"notes": {"before": 2, "after": 1}}, "prompt": REFINE, "mode": mode},
        },
        "output": {"path": "out.parquet"},
        "limits": {"concurrency": 4},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(path)


def _expected_prompts(rows: list[dict[str, Any]]) -> set[str]:
    """What each chunk's refine prompt must say, from the notes stored for its neighbours."""
    point = {r["_row_key"]: r["notes.point"] for r in rows}
    out = set()
    for key in point:
        doc, n = key.split("#")
        near = [point.get(f"{doc}#{i}") for i in range(int(n) - 2, int(n) + 2)]
        before, after = [p for p in near[:2] if p], [p for p in near[3:] if p]
        out.add(prompt_key(f"Refine part {n}: {point[key]}\nbefore: {' / '.join(before)}\nafter: {' / '.join(after)}"))
    return out


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
@pytest.mark.parametrize("mode", ["realtime", "batch"])
def test_each_chunk_reads_its_neighbours_answers(fake, workdir, mode):
    spec = _spec(workdir, mode=mode)
    planned = batchor.plan(spec).steps
    chunks = planned["notes"]["to_run"]
    assert chunks > 4 and planned["refine"]["projected"] == chunks  # the neighbours' notes are not known yet

    assert batchor.apply(spec).status == "succeeded"
    rows = pq.read_table(workdir / "out.parquet").to_pylist()
    prompts = set(fake.stats()["by_prompt"])
    assert _expected_prompts(rows) <= prompts
    assert fake.stats()["answered"] == 2 * chunks  # each note and each refinement once
    assert batchor.plan(spec).steps["refine"]["to_run"] == 0  # keyed by what was sent: all cached


def test_the_plan_counts_the_gathered_answers(fake, workdir):
    (workdir / "alone").mkdir()
    alone = batchor.plan(_spec(workdir / "alone", {"prompt": REFINE.split("\nbefore")[0]})).steps["refine"]
    spec = _spec(workdir)
    projected = batchor.plan(spec).steps["refine"]
    assert projected["projected"] == projected["to_run"] == alone["to_run"]
    assert projected["input_tokens"] > alone["input_tokens"] + projected["to_run"] * 6  # up to 3 notes each

    assert batchor.apply(spec).status == "succeeded"
    exact = batchor.plan(spec, refresh={"refine"}).steps["refine"]  # rendered with the real neighbours
    assert exact["projected"] == 0 and exact["to_run"] == projected["to_run"]

    # the projection carries each chunk's real number of neighbours (fewer at the ends), each a
    # sample note: what the gathered lines add is counted row by row, not a full window per row
    sample = sample_value(NOTES, "projection")["point"]
    counter = get_counter("openai", "gpt-4.1-mini")
    keys = [r["_row_key"] for r in pq.read_table(workdir / "out.parquet").to_pylist()]
    of = Counter(k.split("#")[0] for k in keys)
    lines = [_gathered_lines(sample, int(k.split("#")[1]), of[k.split("#")[0]]) for k in keys]
    added = projected["input_tokens"] - alone["input_tokens"]
    assert abs(added - sum(counter.count(t) for t in lines)) <= len(keys)  # a token per row at the seams
    full = sum(counter.count(f"\nbefore: {sample} / {sample}\nafter: {sample}") for _ in keys)
    assert added < full - 2 * len(keys)


def _gathered_lines(sample: str, n: int, of: int) -> str:
    before, after = [sample] * min(2, n - 1), [sample] * min(1, of - n)
    return f"\nbefore: {' / '.join(before)}\nafter: {' / '.join(after)}"


def test_a_neighbour_without_an_answer_is_left_out(fake, workdir):
    spec = _spec(workdir, {"gather": {"notes": {"before": 1}}, "prompt": REFINE, "when": "chunks.n != 2"})
    steps = yaml.safe_load(Path(spec).read_text())
    steps["steps"]["notes"]["when"] = "chunks.n != 1"  # the first chunk of each document has no note
    Path(spec).write_text(yaml.safe_dump(steps, sort_keys=False))
    assert batchor.apply(spec).status == "succeeded"
    rows = {r["_row_key"]: r for r in pq.read_table(workdir / "out.parquet").to_pylist()}
    assert rows["d1#1"]["refine"] is None  # its own note is missing: skipped as any dependent row
    prompts = set(fake.stats()["by_prompt"])
    before = rows["d1#2"]["notes.point"]
    assert prompt_key(f"Refine part 3: {rows['d1#3']['notes.point']}\nbefore: {before}\nafter: ") in prompts
    assert rows["d1#2"]["refine"] is None and rows["d1#3"]["refine"]


@pytest.mark.parametrize(
    ("refine", "message"),
    [
        ({"gather": {"nothing": {"before": 1}}, "prompt": REFINE}, "no earlier step 'nothing'"),
        ({"gather": {"notes": {}}, "prompt": REFINE}, "gathers no neighbour"),
        ({"gather": {"chunks": {"before": 1}}, "prompt": REFINE}, "must answer the same elements"),
    ],
)
def test_a_wrong_gather_is_refused_at_plan(workdir, refine, message):
    with pytest.raises(SpecError, match=message):
        batchor.plan(_spec(workdir, refine), save=False)


def test_gather_needs_element_rows(workdir):
    spec = _spec(workdir)
    body = yaml.safe_load(Path(spec).read_text())
    body["steps"] = {
        "notes": {"prompt": "{{ row.body }}", "output": {"schema": NOTES}},
        "refine": {"gather": {"notes": {"before": 1}}, "prompt": "{{ gather.notes.before }}"},
    }
    Path(spec).write_text(yaml.safe_dump(body, sort_keys=False))
    with pytest.raises(SpecError, match="input rows against input rows"):
        batchor.plan(spec, save=False)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_kill_9_while_chunks_gather_then_resume_asks_nothing_answered_again(fake, workdir):
    fake.configure(latency_ms=300)
    spec = _spec(workdir)
    write_csv(workdir / "docs.csv", [{"doc": f"k{i}", "body": _doc(f"k{i} kill", 16)} for i in range(3)])
    steps = batchor.plan(spec).steps
    chunks, planned = steps["notes"]["to_run"], steps["notes"]["to_run"] + steps["refine"]["to_run"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "batchor.cli.main", "apply", spec, "--yes"],
        cwd=workdir,
        env=cli_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and fake.stats()["requests"] < chunks + 5:  # the gathering step runs
        time.sleep(0.05)
    time.sleep(0.5)  # answers are stored at least every flush interval
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    sent = fake.stats()["requests"]
    stored = _answered(workdir / ".batchor" / "state.duckdb") - 3  # not the split's chunk lists: no calls
    assert chunks < stored < planned and sent < planned  # killed while refining

    assert batchor.apply(spec).status == "succeeded"
    assert fake.stats()["requests"] - sent == planned - stored  # the rest once each, nothing stored again
    assert batchor.plan(spec).steps["refine"]["to_run"] == 0
    rows = pq.read_table(workdir / "out.parquet").to_pylist()
    assert _expected_prompts(rows) <= set(fake.stats()["by_prompt"])  # resumed with the same neighbours
