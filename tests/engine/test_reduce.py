"""Reduce steps: one request per group, folded when a group outgrows the context window; the
plan's count of calls is the count made (real openai SDK against the fake provider)."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

import batchor
from batchor import operations
from tests.cli.cli_helpers import cli_env
from tests.conftest import write_csv

SUMMARY = {
    "type": "object",
    "properties": {"points": {"type": "array", "items": {"type": "string"}, "maxItems": 2}},
    "required": ["points"],
    "additionalProperties": False,
}
PROMPT = "Summarise {{ group.key.product }}:{% for r in group.rows %}\n- {{ r.text }}{% endfor %}"
FOLD = "Merge summaries of {{ group.key.product }}:{% for p in group.rows %}\n- {{ p.points | join('; ') }}{% endfor %}"


def _rows(big: int, small: int) -> list[dict[str, str]]:
    text = "the battery lasts two days but the strap broke after a week of daily running"
    rows = [{"id": f"a{i}", "product": "watch", "text": f"{text} ({i})"} for i in range(big)]
    return rows + [{"id": f"b{i}", "product": "kettle", "text": f"boils fast ({i})"} for i in range(small)]


def _spec(folder: Path, rows: list[dict[str, str]], **reduce: Any) -> str:
    write_csv(folder / "data.csv", rows)
    spec = {
        "name": "grouped",
        "input": {"path": "data.csv", "key": "id"},
        "model": {
            "provider": "openai",
            "name": "gpt-4.1-mini",
            "params": {"max_tokens": 40},
            "context_window": 400,
        },
        "steps": {
            "summary": {
                "reduce": {"group_by": ["product"], "fold_prompt": FOLD, **reduce},
                "prompt": PROMPT,
                "output": {"schema": SUMMARY},
            }
        },
        "output": {"path": "out/groups.csv"},
        "limits": {"concurrency": 4},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(path)


def _prompts(stats: dict[str, Any]) -> list[str]:
    return [body["messages"][-1]["content"] for body in stats["bodies"]]


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_a_group_over_the_context_window_is_folded_and_the_plan_counts_its_calls(fake, workdir):
    spec = _spec(workdir, _rows(big=30, small=3))
    planned = batchor.plan(spec).steps["summary"]
    assert planned["to_run"] > 2  # the watch group alone needs parts and folds

    assert batchor.apply(spec).status == "succeeded"
    stats = fake.stats()
    assert stats["requests"] == planned["to_run"]
    prompts = _prompts(stats)
    assert len(prompts) == stats["requests"] < 20  # the fake keeps the first 20 bodies
    assert sum(p.startswith("Merge summaries of watch") for p in prompts) >= 1
    assert not any(p.startswith("Merge summaries of kettle") for p in prompts)
    parts = [p for p in prompts if p.startswith("Summarise watch")]
    assert len(parts) > 1 and sum(p.count("- the battery") for p in parts) == 30  # each row in one part

    groups = _read(workdir / "out" / "groups.summary.csv")
    assert [(g["product"], g["_rows"], g["_status"]) for g in groups] == [
        ("watch", "30", "succeeded"),
        ("kettle", "3", "succeeded"),
    ]
    rows = _read(workdir / "out" / "groups.csv")
    assert len(rows) == 33 and "summary.points" not in rows[0]  # keep: groups leaves the rows alone
    assert batchor.plan(spec).steps["summary"]["to_run"] == 0  # every call of the tree is cached
    operations.export(workdir / "again.jsonl", state=str(workdir / ".batchor" / "state.duckdb"))
    again = [json.loads(line) for line in (workdir / "again.summary.jsonl").read_text().splitlines()]
    assert [(g["product"], g["_rows"]) for g in again] == [("watch", 30), ("kettle", 3)]
    assert again[0]["summary.points"] == json.loads(groups[0]["summary.points"])


def test_a_new_row_re_asks_only_its_group_and_keep_rows_broadcasts(fake, workdir):
    rows = _rows(big=5, small=2)
    spec = _spec(workdir, rows, keep="rows")
    assert batchor.apply(spec).status == "succeeded"
    assert fake.stats()["requests"] == 2
    fake.reset()

    spec = _spec(workdir, [*rows, {"id": "b9", "product": "kettle", "text": "loud whistle"}], keep="rows")
    assert batchor.plan(spec).steps["summary"]["to_run"] == 1
    assert batchor.apply(spec).status == "succeeded"
    assert [p.split(":")[0] for p in _prompts(fake.stats())] == ["Summarise kettle"]
    out = _read(workdir / "out" / "groups.csv")
    by_product: dict[str, set[str]] = {}
    for row in out:
        by_product.setdefault(row["product"], set()).add(row["summary.points"])
    assert all(len(answers) == 1 and "" not in answers for answers in by_product.values())


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_kill_9_during_a_folded_reduce_then_resume_asks_nothing_answered_again(fake, workdir):
    fake.configure(latency_ms=300)
    spec = _spec(workdir, _rows(big=120, small=3))
    planned = batchor.plan(spec).steps["summary"]["to_run"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "batchor.cli.main", "apply", spec, "--yes"],
        cwd=workdir,
        env=cli_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and fake.stats()["requests"] < 5:
        time.sleep(0.05)
    time.sleep(0.5)  # answers are stored at least every flush interval
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    sent, stored = fake.stats()["requests"], _answered(workdir / ".batchor" / "state.duckdb")
    assert 0 < stored < planned and sent < planned  # killed mid-tree
    assert batchor.apply(spec).status == "succeeded"
    assert fake.stats()["requests"] - sent == planned - stored  # the rest once each, nothing stored again
    assert batchor.plan(spec).steps["summary"]["to_run"] == 0


def _answered(state: Path) -> int:
    try:
        with duckdb.connect(str(state), read_only=True) as db:
            return db.execute("SELECT count(*) FROM results WHERE status = 'succeeded'").fetchone()[0]
    except duckdb.Error:  # not created yet, or held by the writer a moment
        return 0
