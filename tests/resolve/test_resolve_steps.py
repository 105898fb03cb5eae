"""`resolve:` steps inside a pipeline (plan/resolve_walk.py, engine/resolve_run.py): a row step
extracts a value, the resolve step judges pairs of rows through the real openai SDK against the
fake, and later steps read each row's cluster and canonical value; canonical values asked by
prompt once per cluster; pairs blocked by embedding similarity; the plan counts what is sent."""

from __future__ import annotations

import csv
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import batchor
from batchor.errors import ResolveError
from tests.cli.cli_helpers import cli_env
from tests.conftest import write_csv
from tests.engine.test_reduce import _answered

NOTES = [
    ("n1", "Invoice from Blue Harbor Logistics Inc — 3 pallets", "Lyon"),
    ("n2", "Payment to BLUE HARBOR LOGISTICS, LLC — March", "Lyon"),
    ("n3", "Order by Blue Harbor Logistics — rush", "Lyon"),
    ("n4", "Invoice from Blue Harbor Capital — fees", "Graz"),
    ("n5", "Credit note from Cedar Ridge Foods — damaged", "Porto"),
    ("n6", "Invoice from Cedar Ridge Foods Corp. — crates", "Porto"),
    ("n7", "Payment to Summit Oak Energy — Q2", "Leeds"),
]
SAME = {"type": "object", "properties": {"same": {"type": "boolean"}}, "required": ["same"]}
COMPANY = {"type": "object", "properties": {"company": {"type": "string"}}, "required": ["company"]}
CANONICAL = {
    "prompt": "Write this company's name once, cleanly.\n{% for v in cluster.variants %}- {{ v }}\n{% endfor %}"
}


def _spec(
    folder: Path, canonical: object = "most_frequent", block: dict | None = None, extra: dict | None = None
) -> Path:
    write_csv(folder / "notes.csv", [{"id": i, "note": n, "city": c} for i, n, c in NOTES])
    steps = {
        "company": {"prompt": "Note: {{ row.note }}\nWhich company?", "output": {"schema": COMPANY}},
        "entity": {
            "resolve": {
                "value": "company.company",
                "block": block or {"key": "lower(left(regexp_replace(value, '[^A-Za-z]', '', 'g'), 6))"},
                "canonical": canonical,
            },
            "prompt": "A: {{ pair.a.company.company }}\nB: {{ pair.b.company.company }}\nSame company?",
            "output": {"schema": SAME},
        },
        "tagged": {"sql": "SELECT _row_key, entity.canonical || ' #' || entity.cluster AS tag FROM rows"},
        **(extra or {}),
    }
    spec = {
        "name": "mentions",
        "input": {"path": "notes.csv", "key": "id"},
        "model": {"provider": "openai", "name": "gpt-4.1-mini", "params": {"max_tokens": 20}},
        "steps": steps,
        "output": {"path": "out/notes.csv"},
        "limits": {"concurrency": 2},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True))
    return path


def _rows(folder: Path) -> dict[str, dict[str, str]]:
    with (folder / "out" / "notes.csv").open(newline="", encoding="utf-8") as handle:
        return {r["id"]: r for r in csv.DictReader(handle)}


def _step(plan: object, name: str) -> object:
    return next(s for s in plan.header.steps if s.name == name)  # type: ignore[attr-defined]


def test_extract_then_resolve_then_use_the_cluster_and_resume(fake, workdir):
    fake.configure(judge_pairs=True)
    result = batchor.apply(_spec(workdir), max_cost=1, progress=False)
    assert result.status == "succeeded"
    rows = _rows(workdir)
    assert {rows[k]["entity.cluster"] for k in ("n1", "n2", "n3")} == {"n1"}
    assert rows["n4"]["entity.cluster"] == "n4"  # shares the block, judged another company
    assert rows["n5"]["tagged.tag"] == rows["n6"]["tagged.tag"] == "Cedar Ridge Foods Corp. #n5"  # the longest of a tie
    assert rows["n7"]["entity.canonical"] == "Summit Oak Energy"  # paired with nobody: its own cluster
    assert fake.stats()["answered"] == 7 + 6 + 1  # extractions, blue pairs, cedar pair
    fake.reset()
    again = batchor.apply(_spec(workdir), max_cost=1, progress=False)
    assert again.status == "succeeded" and fake.stats()["requests"] == 0  # every pair answered from the state
    exported = batchor.export(workdir / "out" / "again.csv")["output"]
    with open(exported, newline="", encoding="utf-8") as handle:
        assert {r["id"]: r["entity.canonical"] for r in csv.DictReader(handle)} == {
            k: r["entity.canonical"] for k, r in rows.items()
        }


def test_the_canonical_prompt_is_asked_once_per_cluster_and_counted_by_the_plan(fake, workdir):
    fake.configure(judge_pairs=True)
    batchor.apply(_spec(workdir), max_cost=1, progress=False)  # extractions and pairs stored
    plan = batchor.plan(_spec(workdir, CANONICAL), save=False)
    entity = _step(plan, "entity")
    assert entity.counts.to_run == 2 and not entity.counts.estimated  # blue and cedar: several values each
    fake.reset()
    result = batchor.apply(_spec(workdir, CANONICAL), max_cost=1, progress=False)
    assert result.status == "succeeded" and fake.stats()["answered"] == entity.counts.to_run
    rows = _rows(workdir)
    assert rows["n2"]["entity.canonical"] == "Blue Harbor Logistics"  # the model's clean name
    assert rows["n6"]["tagged.tag"] == "Cedar Ridge Foods #n5"
    assert rows["n7"]["entity.canonical"] == "Summit Oak Energy"  # one value: no request
    fake.reset()
    batchor.apply(_spec(workdir, CANONICAL), max_cost=1, progress=False)
    assert fake.stats()["requests"] == 0  # keyed by the cluster's content: answered from the state


def test_pairs_blocked_by_embedding_similarity_are_bounded_then_counted(fake, workdir):
    fake.configure(judge_pairs=True)
    text = "{{ company.company | lower | replace(',', '') | replace('.', '') | replace(' inc', '') "
    text += "| replace(' corp', '') }}"
    embed = {"vec": {"embed": text, "model": {"name": "text-embedding-3-small"}}}
    block = {"similar": {"step": "vec", "threshold": 0.99, "top_k": 2}}
    before = batchor.plan(_spec(workdir, block=block, extra=embed), save=False)
    assert _step(before, "entity").counts.to_run == 7 * 2  # vectors unknown: top_k per row bounds the pairs
    assert fake.stats()["requests"] == 0
    batchor.apply(_spec(workdir, block=block, extra=embed), max_cost=1, progress=False)
    rows = _rows(workdir)
    assert rows["n1"]["entity.cluster"] == rows["n3"]["entity.cluster"] == "n1"  # one text: cosine 1
    assert rows["n5"]["entity.cluster"] == rows["n6"]["entity.cluster"] == "n5"
    assert rows["n2"]["entity.cluster"] == "n2"  # `llc` makes another text, another vector: no candidate
    after = batchor.plan(_spec(workdir, block=block, extra=embed), save=False)
    assert _step(after, "entity").counts.cached == 2 and _step(after, "entity").counts.to_run == 0


def test_pairs_and_canonical_requests_go_through_the_batch_api(fake, workdir):
    fake.configure(judge_pairs=True, batch_polls=1, batch_seconds=0.0)
    result = batchor.apply(_spec(workdir, CANONICAL), mode="batch", max_cost=1, progress=False)
    assert result.status == "succeeded"
    assert fake.stats()["by_endpoint"].get("openai.chat_completions", 0) == 0  # every request in a batch
    assert _rows(workdir)["n3"]["entity.canonical"] == "Blue Harbor Logistics"


def test_max_pairs_bounds_the_plan_and_stops_a_rule_that_pairs_more(fake, workdir):
    fake.configure(judge_pairs=True)
    block = {"key": "city", "max_pairs": 3}
    plan = batchor.plan(_spec(workdir, block=block), save=False)
    assert _step(plan, "entity").counts.to_run == 3  # names unknown yet: 21 possible pairs, bounded at 3
    with pytest.raises(ResolveError, match="pairs 4 rows, above max_pairs 3"):  # blue in Lyon: 3 pairs, cedar: 1
        batchor.apply(_spec(workdir, block={"key": "city", "max_pairs": 3}), max_cost=1, progress=False)
    assert fake.stats()["answered"] == 7  # the extractions only: no pair was sent
    fake.reset()
    batchor.apply(_spec(workdir, block={"key": "city", "max_pairs": 4}), max_cost=1, progress=False)
    assert fake.stats()["answered"] == 4  # the extractions were kept: the pairs alone


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_kill_9_while_pairs_are_judged_then_resume_pays_for_nothing_twice(fake, workdir):
    fake.configure(judge_pairs=True, latency_ms=300)
    spec = _spec(workdir, CANONICAL)
    planned = 7 + 7 + 2  # extractions, pairs, canonical names (blue, cedar)
    proc = subprocess.Popen(
        [sys.executable, "-m", "batchor.cli.main", "apply", str(spec), "--yes"],
        cwd=workdir,
        env=cli_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and fake.stats()["requests"] < 7 + 2:  # judging pairs
        time.sleep(0.05)
    time.sleep(0.5)  # answers are stored at least every flush interval
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    sent = fake.stats()["requests"]
    stored = _answered(workdir / ".batchor" / "state.duckdb")
    assert 7 < stored < planned and sent < planned  # killed while judging
    assert batchor.apply(spec, progress=False).status == "succeeded"
    assert fake.stats()["requests"] - sent == planned - stored  # the rest once each, nothing stored again
    assert _rows(workdir)["n2"]["entity.canonical"] == "Blue Harbor Logistics"


@pytest.mark.parametrize(("provider", "name"), [("anthropic", "claude-haiku-4-5"), ("gemini", "gemini-2.5-flash")])
def test_pairs_and_canonical_requests_go_through_each_batch_api(fake, workdir, provider, name):
    """The same resolve pipeline through Anthropic's and Gemini's Batch APIs: every request in a
    batch, the clusters and canonical names as with OpenAI's."""
    fake.configure(judge_pairs=True, batch_polls=1, batch_seconds=0.0)
    spec = _spec(workdir, CANONICAL)
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    data["model"] = {"provider": provider, "name": name, "params": {"max_tokens": 20}}
    spec.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    result = batchor.apply(spec, mode="batch", max_cost=1, progress=False)
    assert result.status == "succeeded", result.stop_reason
    realtime = {"anthropic": "anthropic.messages", "gemini": "gemini.generate_content"}[provider]
    stats = fake.stats()
    assert stats["by_endpoint"].get(realtime, 0) == 0  # no realtime call
    # every request in a batch: extractions, then pairs, then names, each batch once
    assert stats["batches_created"] >= 3 and stats["batch_rows"] == result.succeeded  # requests answered
    assert not stats["batch_rows_duplicated"]
    rows = _rows(workdir)
    assert rows["n3"]["entity.canonical"] == "Blue Harbor Logistics"
    assert rows["n1"]["entity.cluster"] == rows["n2"]["entity.cluster"] == rows["n3"]["entity.cluster"]
    assert rows["n4"]["entity.cluster"] != rows["n1"]["entity.cluster"]
