"""`resolve:` jobs (batchor/resolve/): the plan counts the blocking rule's pairs before any call,
the step judges them through the real openai SDK against the fake (realtime and Batch API),
connected pairs become clusters with a canonical value, and a resumed run pays nothing twice."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

import batchor
from batchor.errors import ResolveError
from batchor.plan.clusters import canonical_values
from batchor.resolve import components
from tests.conftest import write_csv

ROWS = [
    {"id": "r1", "name": "Blue Harbor Logistics Inc", "city": "Lyon"},
    {"id": "r2", "name": "BLUE HARBOR LOGISTICS, LLC", "city": "Lyon"},
    {"id": "r3", "name": "Blue Harbor Logistics", "city": "Lyon"},
    {"id": "r4", "name": "Blue Harbor Capital", "city": "Graz"},
    {"id": "r5", "name": "Cedar Ridge Foods", "city": "Porto"},
    {"id": "r6", "name": "Cedar Ridge Foods Corp.", "city": "Porto"},
    {"id": "r7", "name": "Summit Oak Energy", "city": "Leeds"},
]
SCHEMA = {"type": "object", "properties": {"same": {"type": "boolean"}}, "required": ["same"]}


def _spec(folder: Path, block: dict, **model: object) -> Path:
    write_csv(folder / "companies.csv", ROWS)
    spec = {
        "name": "firms",
        "input": {"path": "companies.csv", "key": "id"},
        "model": {"provider": "openai", "name": "gpt-4.1-mini", "params": {"max_tokens": 20}, **model},
        "resolve": {"value": "name", "block": block},
        "steps": {"same": {"prompt": "A: {{ row.a_name }}\nB: {{ row.b_name }}\nSame?", "output": {"schema": SCHEMA}}},
        "output": {"path": "out/pairs.csv"},
        "limits": {"concurrency": 2},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _clusters(folder: Path) -> dict[str, tuple[str, str]]:
    with (folder / "out" / "pairs.clusters.csv").open(newline="", encoding="utf-8") as handle:
        return {r["id"]: (r["_cluster"], r["_canonical"]) for r in csv.DictReader(handle)}


BLOCK_KEY = {"key": "lower(left(regexp_replace(name, '[^A-Za-z]', '', 'g'), 5))"}


def test_the_plan_counts_the_pairs_of_each_block_before_any_call(fake, workdir):
    plan = batchor.plan(_spec(workdir, BLOCK_KEY), save=False)
    assert plan.header.totals.rows == 6 + 1  # blue (4 rows): 6 pairs; cedar (2): 1; summit alone: 0
    assert fake.stats()["requests"] == 0


def test_judged_pairs_become_clusters_with_a_canonical_value(fake, workdir):
    fake.configure(judge_pairs=True)
    result = batchor.apply(_spec(workdir, BLOCK_KEY), max_cost=1, progress=False)
    assert result.status == "succeeded" and fake.stats()["answered"] == 7
    clusters = _clusters(workdir)
    assert {clusters[k][0] for k in ("r1", "r2", "r3")} == {"r1"}
    assert clusters["r4"] == ("r4", "Blue Harbor Capital")  # shares the block, judged different
    assert clusters["r5"] == clusters["r6"] == ("r5", "Cedar Ridge Foods Corp.")  # a tie: the longest
    assert clusters["r7"] == ("r7", "Summit Oak Energy")  # paired with nobody: its own cluster
    assert clusters["r1"][1] == "BLUE HARBOR LOGISTICS, LLC"  # three spellings once each: the longest
    fake.reset()
    batchor.apply(_spec(workdir, BLOCK_KEY), max_cost=1, progress=False)
    assert fake.stats()["requests"] == 0  # resumed: every pair answered from the state


def test_a_sql_condition_blocks_and_the_batch_api_judges(fake, workdir):
    fake.configure(judge_pairs=True, batch_polls=1, batch_seconds=0.0)
    block = {"on": "jaro_winkler_similarity(lower(a.name), lower(b.name)) > 0.9"}
    result = batchor.apply(_spec(workdir, block), mode="batch", max_cost=1, progress=False)
    assert result.status == "succeeded"
    assert fake.stats()["by_endpoint"].get("openai.chat_completions", 0) == 0  # judged in a batch
    clusters = _clusters(workdir)
    assert clusters["r5"][0] == clusters["r6"][0] == "r5"
    assert clusters["r7"][0] == "r7"


def test_a_judge_without_a_boolean_same_is_refused(workdir):
    spec = yaml.safe_load(_spec(workdir, BLOCK_KEY).read_text())
    spec["steps"]["same"]["output"] = "text"
    (workdir / "spec.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(ResolveError) as caught:
        batchor.plan(workdir / "spec.yaml", mock=True, save=False)
    assert caught.value.code == "resolve_invalid" and "boolean `same`" in caught.value.message


@pytest.mark.parametrize(
    ("block", "needle"),
    [({"key": "lower(left(nme, 3))"}, "resolve.block.key"), ({"key": "id || 'x'"}, "pairs none")],
)
def test_a_blocking_rule_that_fails_or_pairs_nothing_is_refused(workdir, block, needle):
    with pytest.raises(ResolveError) as caught:
        batchor.plan(_spec(workdir, block), mock=True, save=False)
    assert needle in caught.value.message


def test_clusters_are_connected_components_named_by_their_smallest_key():
    found = components(["d", "a", "c", "b", "e"], [("c", "d"), ("b", "c"), ("a", "e")])
    assert found == {"a": "a", "e": "a", "b": "b", "c": "b", "d": "b"}
    values = {"a": "Acme", "e": "Acme Inc", "b": "X", "c": "X", "d": "Xy"}
    assert canonical_values(found, values, "most_frequent") == {"a": "Acme Inc", "b": "X"}
    assert canonical_values(found, values, "longest") == {"a": "Acme Inc", "b": "Xy"}
