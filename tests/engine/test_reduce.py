"""Reduce steps: one request per group, folded when a group outgrows the context window; the
plan's count of calls is the count made (real openai SDK against the fake provider)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import yaml

import batchor
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
