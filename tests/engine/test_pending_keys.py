"""A step's pending keys are kept as Arrow, not as Python strings (10M rows must fit in memory),
and the engine still sends each pending key once, in plan order."""

from __future__ import annotations

import json
import tracemalloc
import types

import pyarrow as pa
import pytest
from conftest import make_spec, write_csv
from stored_results import stored_results

from batchor import api
from batchor.engine.pending import PendingKeys
from batchor.engine.work import StepWork
from batchor.plan.model import req_column
from batchor.state import open_state

ROWS = 20_000


def _job(workdir, rows: int):
    """A plan whose rows repeat texts (so request keys), skip some rows (no key) and have a third
    of their keys answered in the state; returns the plan, the store and every row's key."""
    make_spec(workdir, steps={"classify": {"prompt": "Review: {{ row.text }}", "when": "row.id[-1] != '7'"}})
    write_csv(workdir / "data.csv", [{"id": f"r{i}", "text": f"text {i % (rows // 2)}"} for i in range(rows)])
    plan = api.plan(workdir / "spec.yaml", save=False, mock=True)
    store = open_state(str(workdir / ".batchor" / "state.duckdb"))
    keys = [k for b in plan.iter_batches([req_column("classify", "key")]) for k in b.column(0).to_pylist()]
    answered = list(dict.fromkeys(k for k in keys if k is not None))[::3]
    store.record_results(stored_results([(k, "succeeded", "an answer") for k in answered]))
    return plan, store, keys, set(answered)


def test_items_send_each_pending_key_once_in_plan_order(workdir):
    plan, store, keys, answered = _job(workdir, 2_000)
    work = StepWork(plan, plan.header.steps[0], store)
    work.scan()
    expected = list(dict.fromkeys(k for k in keys if k is not None and k not in answered))
    assert list(work.pending) == expected
    assert work.skipped == keys.count(None) and work.cached == sum(k in answered for k in keys)
    items = list(work.items())
    assert [i.key for i in items] == expected
    assert all(i.step == "classify" and i.messages for i in items)
    held = expected[5::4]
    work.pending, part = work.pending.without(held), work.pending.only(set(held))
    assert [i.key for i in work.items()] == [k for k in expected if k not in set(held)]
    assert list(part) == held  # plan order, whatever order the keys were given in


def test_items_parse_only_the_keys_a_worker_wants(workdir, monkeypatch):
    """A worker of a shared run takes the keys it claimed: the others are walked past unparsed."""
    import batchor.engine.work as work_module

    plan, store, keys, answered = _job(workdir, 2_000)
    work = StepWork(plan, plan.header.steps[0], store)
    work.scan()
    expected = list(work.pending)
    mine = set(expected[1::7])
    asked: list[str] = []
    parsed: list[str] = []
    real_loads = json.loads
    monkeypatch.setattr(work_module, "json", types.SimpleNamespace(loads=lambda s: parsed.append(s) or real_loads(s)))
    got = [i.key for i in work.items(wanted=lambda k: asked.append(k) or k in mine)]
    assert got == [k for k in expected if k in mine]
    assert asked == expected and len(parsed) == len(mine)


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_pending_keys_of_a_big_step_hold_no_python_strings(workdir):
    plan, store, keys, answered = _job(workdir, ROWS)
    work = StepWork(plan, plan.header.steps[0], store)
    tracemalloc.start()
    try:
        work.scan()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(work.pending) > ROWS // 4
    assert held < 20 * ROWS  # a dict of the keys as str: ~180 bytes a key


def test_pending_keys_set_operations():
    pending = PendingKeys.first_seen(pa.chunked_array([["b", None, "a", "b"], ["c", "a", None, "d"]]))
    assert list(pending) == ["b", "a", "c", "d"] and len(pending) == 4 and pending
    assert "c" in pending and "x" not in pending and None not in pending
    assert pending.mask(pa.array(["d", None, "x", "b"])).to_pylist() == [True, False, False, True]
    assert list(pending.only(["d", "b", "x"])) == ["b", "d"]
    assert list(pending.without({"a", "x"})) == ["b", "c", "d"]
    assert not PendingKeys() and list(PendingKeys()) == [] and len(pending.only([])) == 0
