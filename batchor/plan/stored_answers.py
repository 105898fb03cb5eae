"""Plan stage: the stored answers of many steps' requests, asked of the state together.

Planning a pipeline looks up each step's requests in the state: their answers (a later step renders
with them) and those that failed for good (never sent again). Asked step by step, a spec of many
small steps made two queries per step and input batch; the steps of one level of the pipeline (none
reads another's answers) are asked at once, so planning costs a fixed number of queries per level
whatever the number of steps (`tests/engine/test_many_steps_queries.py` counts them).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from batchor.plan.dependent_tally import FAILED, SKIPPED
from batchor.plan.model import StepPlan
from batchor.state.base import StateStore
from batchor.state.cache import SMALL_KEYS, deterministic_codes


def stored_answers(
    state: StateStore | None,
    asked: Sequence[tuple[StepPlan, list[str | None]]],
    refresh: frozenset[str],
    retry_failed: bool,
) -> list[list[Any]]:
    """Per step of `asked` (a step and its rows' request keys), per row: the parsed stored answer,
    FAILED when it failed for good earlier (unless `retry_failed`), None when there is none yet,
    SKIPPED for a row without a request. Steps are asked together, at most SMALL_KEYS keys a query."""
    looked = [state is not None and step.name not in refresh and "*" not in refresh for step, _ in asked]
    succeeded: dict[str, str | None] = {}
    settled: set[str] = set()
    group: set[str] = set()
    for (_, keys), look in zip(asked, looked):
        if look:
            group.update(k for k in keys if k is not None)
        if len(group) >= SMALL_KEYS:
            _look_up(state, group, retry_failed, succeeded, settled)
            group = set()
    if group:
        _look_up(state, group, retry_failed, succeeded, settled)
    return [
        [_answer(step, k, succeeded, settled) if look else (None if k is not None else SKIPPED) for k in keys]
        for (step, keys), look in zip(asked, looked)
    ]


def downstream(answers: list[Any]) -> list[Any]:
    """What later steps see: a request that failed for good never answers, so rows using it skip."""
    return [SKIPPED if a is FAILED else a for a in answers]


def _look_up(
    state: StateStore | None, keys: set[str], retry_failed: bool, succeeded: dict[str, str | None], settled: set[str]
) -> None:
    """One answer query and one failure query for `keys`, added to `succeeded` and `settled`."""
    assert state is not None
    array = pa.array(sorted(keys), pa.string())
    found = state.results_for_keys(array)
    for key, status, output in zip(*(found.column(c).to_pylist() for c in ("request_key", "status", "output"))):
        if status == "succeeded":
            succeeded[key] = output
    if not retry_failed:
        settled.update(state.failed_key_array(array, deterministic_codes()).to_pylist())


def _answer(step: StepPlan, key: str | None, succeeded: dict[str, str | None], settled: set[str]) -> Any:
    if key is None:
        return SKIPPED
    if key in succeeded:
        output = succeeded[key]
        return json.loads(output) if step.json_answers and output is not None else output
    return FAILED if key in settled else None
