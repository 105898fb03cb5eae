"""A spec with many steps and few rows asks the state a fixed number of queries per wave, not
per step: a wave's scan (which maps are recorded, the new maps, the cache and the failures), the
batch hand-over's live batches, and the export's and streamed output's reads take every step at
once. Before, each step asked about eight (2,000 steps x 2 rows did not finish apply in 300 s)."""

from __future__ import annotations

import yaml
from conftest import write_csv

from batchor import api
from batchor.state import duckdb_file


def _spec(folder, steps: int, *, then: bool = True, **model: object):
    folder.mkdir()
    write_csv(folder / "data.csv", [{"id": "a", "text": "first"}, {"id": "b", "text": "second"}])
    first = {f"s{i}": {"prompt": f"Step {i} of {steps}: {{{{ row.text }}}}", "output": "text"} for i in range(steps)}
    later = {f"t{i}": {"prompt": f"Again {i}: {{{{ s{i} }}}}", "output": "text"} for i in range(steps)} if then else {}
    spec = {
        "version": 1,
        "name": f"steps{steps}",
        "input": {"path": "data.csv", "key": "id"},
        "model": {"provider": "mock", "name": "echo", **model},
        "steps": {**first, **later},
        "output": {"path": "out.jsonl"},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def _state_units(spec) -> tuple[int, int]:
    """State queries (units of work on the DuckDB file) of one apply, and its answers."""
    state = str(spec.parent / "state.duckdb")
    plan = api.plan(spec, save=False, state=state)
    before = duckdb_file._HOST.units
    outcome = api.apply_compiled(plan, handle_signals=False, state=state)
    assert outcome.status == "succeeded", outcome.stop_reason
    return duckdb_file._HOST.units - before, outcome.requests


def test_state_queries_do_not_grow_with_the_steps(workdir):
    few, few_requests = _state_units(_spec(workdir / "few", 2))
    many, many_requests = _state_units(_spec(workdir / "many", 12))
    assert (few_requests, many_requests) == (8, 48)  # two waves of 2 and 12 steps, 2 rows each
    # The mock answers at once, so flushes are few either way; 20 more steps cost ~160 more queries
    # when each step asks its own (about eight each).
    assert many - few <= 10, (few, many)


def test_steps_with_fallback_models_follow_their_fallbacks_once_per_wave(workdir):
    """Rows answered by a fallback model are pointed at that answer in one statement per wave for
    all its steps (StateStore.follow_fallbacks), not one per step and wave."""
    fallback = {"fallback": ["mock:echo-backup"]}
    few, _ = _state_units(_spec(workdir / "few", 2, **fallback))
    many, many_requests = _state_units(_spec(workdir / "many", 40, **fallback))
    assert many_requests == 160
    assert many - few <= 10, (few, many)


def _plan_units(spec) -> int:
    """State queries of one `plan` (a state that already holds a run of the job)."""
    state = str(spec.parent / "state.duckdb")
    api.apply_compiled(api.plan(spec, save=False, state=state), handle_signals=False, state=state)
    before = duckdb_file._HOST.units
    api.plan(spec, save=False, state=state)
    return duckdb_file._HOST.units - before


def test_planning_asks_the_state_about_many_small_steps_at_once(workdir):
    """The plan counts cached rows and settled failures of all its independent steps in one query
    each, not two per step (2,000 steps of 2 rows spent most of `plan` on them)."""
    few, many = _plan_units(_spec(workdir / "few", 2, then=False)), _plan_units(_spec(workdir / "many", 40, then=False))
    assert many - few <= 20, (few, many)


def test_planning_a_pipeline_of_many_steps_asks_the_same_queries_as_of_few(workdir):
    """Steps that read earlier answers look up their requests level by level, all steps of a level
    at once (plan/stored_answers.py): 12 pairs of steps ask what 2 pairs ask, where each dependent
    step (and each root, for its answers) asked two queries of its own."""
    few, many = _plan_units(_spec(workdir / "few", 2)), _plan_units(_spec(workdir / "many", 12))
    assert many == few, (few, many)
