"""SQL fan-out: one row per list element, stable element keys, cached re-runs, bounded plans
(real openai SDK against the fake provider)."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

import batchor
from batchor import api
from batchor.errors import CostLimitError, SpecError
from tests.conftest import write_csv

ASPECTS = {
    "type": "object",
    "properties": {"aspects": {"type": "array", "items": {"type": "string"}, "maxItems": 3}},
    "required": ["aspects"],
    "additionalProperties": False,
}
KIND = {
    "type": "object",
    "properties": {"kind": {"type": "string", "enum": ["a", "b"]}},
    "required": ["kind"],
    "additionalProperties": False,
}
EXPLODE = "SELECT _row_key, unnest(extract.aspects) AS name FROM rows"


def _spec(folder, rows: int, judge: str = "Judge {{ aspect.name }} in {{ row.text }}", **steps: Any) -> str:
    write_csv(folder / "data.csv", [{"id": f"t{i}", "text": f"review {i}"} for i in range(rows)])
    spec = {
        "name": "fan",
        "input": {"path": "data.csv", "key": "id"},
        "model": {"provider": "openai", "name": "gpt-4.1-mini", "params": {"max_tokens": 30}},
        "steps": {
            "extract": {"prompt": "Aspects of {{ row.text }}", "output": {"schema": ASPECTS}},
            "aspect": {"sql": EXPLODE},
            "judge": {"prompt": judge, "output": "text"},
            **steps,
        },
        "output": {"path": "out.parquet"},
        "limits": {"concurrency": 4},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(path)


def _output(workdir) -> list[dict]:
    return pq.read_table(workdir / "out.parquet").to_pylist()


def _by_input(rows: list[dict]) -> dict[str, list[dict]]:
    grouped = defaultdict(list)
    for row in rows:
        grouped[row["id"]].append(row)
    return grouped


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_downstream_runs_once_per_element_and_reruns_only_what_changed(fake, workdir):
    spec = _spec(workdir, rows=12)
    plan = batchor.plan(spec)
    assert plan.steps["judge"]["projected"] == 12 * 3  # maxItems bounds the fan-out
    assert plan.cost["upper"] > 0 and not plan.header.totals.unbounded
    assert batchor.apply(spec, max_cost=1).status == "succeeded"

    rows = _output(workdir)
    groups = _by_input(rows)
    assert sorted(groups) == sorted(f"t{i}" for i in range(12))  # input order kept, each row there
    for key, elements in groups.items():
        names = [e["aspect.name"] for e in elements]
        assert [e["_row_key"] for e in elements] == [f"{key}#{n}" for n in range(1, len(elements) + 1)]
        assert names == json.loads(elements[0]["extract.aspects"])  # list order
        assert all(e["judge"] and e["_status"] == "succeeded" for e in elements)
    assert fake.stats()["requests"] == 12 + len({(r["aspect.name"], r["text"]) for r in rows})

    fake.reset()  # nothing changed: nothing is sent
    assert batchor.apply(spec, max_cost=1).succeeded == 0
    assert fake.stats()["requests"] == 0

    spec = _spec(workdir, rows=16)  # append rows: only they and their elements run
    batchor.apply(spec, max_cost=1)
    new = [r for r in _output(workdir) if r["id"] in {f"t{i}" for i in range(12, 16)}]
    assert fake.stats()["requests"] == 4 + len({(r["aspect.name"], r["text"]) for r in new})

    fake.reset()  # edit the step after the fan-out: only it runs again, once per element
    spec = _spec(workdir, rows=16, judge="Rate {{ aspect.name }} in {{ row.text }}")
    plan = batchor.plan(spec)
    rows = _output(workdir)
    assert plan.steps["extract"]["to_run"] == 0 and plan.steps["judge"]["projected"] == 0
    assert plan.steps["aspect"]["elements"] == len(rows)
    unique = len({(r["aspect.name"], r["text"]) for r in rows})
    assert plan.steps["judge"]["to_run"] == unique
    batchor.apply(spec, max_cost=1)
    assert fake.stats()["requests"] == unique


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_element_keys_stay_the_same_when_the_list_is_generated_again(fake, workdir):
    spec = _spec(workdir, rows=8)
    batchor.apply(spec, max_cost=1)
    before = [(r["_row_key"], r["aspect.name"], r["judge"]) for r in _output(workdir)]
    fake.reset()
    batchor.apply(spec, max_cost=1, refresh={"extract"})  # same answers again: same keys, judge cached
    assert fake.stats()["by_endpoint"] == {"openai.chat_completions": 8}
    assert [(r["_row_key"], r["aspect.name"], r["judge"]) for r in _output(workdir)] == before


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_element_steps_can_filter_and_skip_per_element(fake, workdir):
    keep = {"sql": "SELECT _row_key, aspect.name AS name FROM rows WHERE aspect.name < 'm'"}
    spec = _spec(workdir, rows=10, judge="Judge {{ keep.name }} ({{ extract.aspects | length }})", keep=keep)
    outcome = batchor.apply(spec, max_cost=1)
    assert outcome.status == "succeeded"
    for row in _output(workdir):
        kept = row["aspect.name"] < "m"
        assert (row["keep.name"] == row["aspect.name"]) is kept
        assert (row["judge"] is not None) is kept


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_a_join_that_matches_several_rows_needs_fan_out_and_a_bound_for_max_cost(fake, workdir):
    write_csv(
        workdir / "teams.csv",
        [{"kind": "a", "team": "red"}, {"kind": "a", "team": "blue"}, {"kind": "b", "team": "green"}],
    )
    join = "SELECT rows._row_key, t.team FROM rows JOIN read_csv('teams.csv') AS t ON t.kind = triage.kind"
    steps = {
        "triage": {"prompt": "Triage {{ row.text }}", "output": {"schema": KIND}},
        "route": {"sql": join},
        "notify": {"prompt": "Tell {{ route.team }} about {{ row.text }}"},
    }

    def spec(route: dict) -> str:
        path = _spec(workdir, rows=10)
        data = yaml.safe_load((workdir / "spec.yaml").read_text())
        data["steps"] = {**steps, "route": {**steps["route"], **route}}
        (workdir / "spec.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    with pytest.raises(SpecError, match="fan_out: true") as info:  # several rows per key, not declared
        batchor.apply(spec({}), max_cost=1)
    assert info.value.code == "spec_invalid"

    known = api.plan(spec({"fan_out": True}), save=False)  # triage is cached now: elements are known
    assert not known.header.totals.unbounded and known.steps["route"]["elements"] > 10
    plan = api.plan(spec({"fan_out": True}), save=False, state=str(workdir / "other.duckdb"))
    assert plan.header.totals.unbounded == ["notify"]
    assert "NO UPPER BOUND" in str(plan)
    with pytest.raises(CostLimitError, match="max_fanout") as refused:
        api.apply(plan, max_cost=1, state=str(workdir / "other.duckdb"), handle_signals=False)
    assert refused.value.code == "cost_unbounded" and refused.value.exit_code == 4

    bounded = spec({"fan_out": True, "max_fanout": 2})
    outcome = batchor.apply(bounded, max_cost=1)
    assert outcome.status == "succeeded"
    rows = _output(workdir)
    for elements in _by_input(rows).values():
        teams = sorted(e["route.team"] for e in elements)
        assert teams in (["blue", "red"], ["green"])
        assert all(e["notify"] for e in elements)


def test_fan_out_spec_errors_are_specific(workdir):
    spec = _spec(workdir, rows=2, other={"sql": "SELECT _row_key, unnest(extract.aspects) AS x FROM rows"})
    with pytest.raises(SpecError, match="both fan out"):
        api.plan(spec, save=False)
    spec = _spec(workdir, rows=2, aspect={"sql": EXPLODE, "fan_out": False, "max_fanout": 3})
    with pytest.raises(SpecError, match="max_fanout"):
        api.plan(spec, save=False)


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_fan_outs_nest_along_one_chain(fake, workdir):
    parts = {"sql": "SELECT _row_key, unnest(string_split(aspect.name, '-')) AS part FROM rows", "max_fanout": 4}
    spec = _spec(workdir, rows=5, judge="{{ part.part }} of {{ aspect.name }} in {{ row.text }}", part=parts)
    plan = batchor.plan(spec)
    assert plan.steps["judge"]["projected"] == 5 * 3 * 4
    assert batchor.apply(spec, max_cost=1).status == "succeeded"
    for row in _output(workdir):
        element, n = row["_row_key"].rsplit("#", 1)
        assert element.startswith(row["id"] + "#")
        assert row["part.part"] == row["aspect.name"].split("-")[int(n) - 1]
        assert row["judge"]


def test_a_fan_out_of_an_input_column_needs_no_llm_step_before_it(fake, workdir):
    words = {"sql": "SELECT _row_key, unnest(string_split(text, ' ')) AS word FROM rows"}
    spec = _spec(workdir, rows=3, judge="Define {{ words.word }}")
    data = yaml.safe_load((workdir / "spec.yaml").read_text())
    data["steps"] = {"words": words, "judge": data["steps"]["judge"]}
    (workdir / "spec.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    plan = api.plan(spec, save=False)
    assert plan.header.totals.rows == 3 and plan.steps["words"]["elements"] == 6  # "review", "<i>"
    assert plan.steps["judge"]["to_run"] == 4  # "review" is asked once
    assert batchor.apply(spec, max_cost=1).status == "succeeded"
    assert [r["_row_key"] for r in _output(workdir)] == ["t0#1", "t0#2", "t1#1", "t1#2", "t2#1", "t2#2"]
    assert fake.stats()["requests"] == 4
