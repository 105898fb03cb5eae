"""What the pilots of a job spent on its rows: the known part of the whole job's cost.

A pilot's rows are cached, part of the job: the whole job is what was paid for them plus the rest's
estimate. That spend is read from the ledger, not summed from the runs at hand, so a second pilot
(`--pilot 160` after `--pilot 20`, the same seed: the first one's rows are cached in it) counts
the first one's spend, and `--pilot auto`'s rounds are not counted twice. An attempt counts when
it was billed to a pilot run of the spec (its name, rehearsal or not) on a request of a row of this
job whose root steps' requests are the full plan's for that row (the same input row and prompts;
the steps below them count on those rows): a pilot of an earlier prompt does not.
"""

from __future__ import annotations

from typing import Any

from batchor.plan.model import req_column
from batchor.plan.plan_file import CompiledPlan
from batchor.spec.inputs import ROW_KEY

_PILOT_ATTEMPTS = """
SELECT a.request_key, coalesce(a.cost_usd, 0) FROM attempts a JOIN runs r ON r.run_id = a.run_id
WHERE r.name = ? AND r.mocked = ? AND a.cost_usd IS NOT NULL
  AND r.run_id IN (SELECT run_id FROM run_steps WHERE kind = 'pilot')"""
_PILOT_REQUESTS = """
SELECT DISTINCT j.job_id, j.step, j.row_key, j.request_key FROM job_requests j
WHERE j.job_id IN (SELECT r.job_id FROM runs r WHERE r.name = ? AND r.mocked = ?
                   AND r.run_id IN (SELECT run_id FROM run_steps WHERE kind = 'pilot'))"""


def pilots_spent(store: Any, full: CompiledPlan) -> float:
    """The ledger's cost of every pilot attempt on a request of this job (see the module's docstring)."""
    params = [full.header.name, bool(full.header.mocked)]
    attempts = store.execute(_PILOT_ATTEMPTS, params)
    if not attempts:
        return 0.0
    keys = _job_keys(store.execute(_PILOT_REQUESTS, params), full)
    return float(sum(cost for key, cost in attempts if key in keys))


def _job_keys(requests: list[tuple[str, str, str, str]], full: CompiledPlan) -> set[str]:
    """The pilots' request keys that belong to this job: on a pilot's row whose root requests are
    the plan's for that row (each pilot job judged on its own)."""
    roots = [s.name for s in full.header.steps if req_column(s.name, "key") in full.data_columns()]
    planned = _root_keys(full, roots, {str(row) for _, _, row, _ in requests})
    same: dict[tuple[str, str], bool] = {}
    for job, step, row, key in requests:
        if step in roots:
            same[job, row] = same.get((job, row), True) and planned.get((step, str(row))) == key
    return {key for job, _, row, key in requests if same.get((job, row), False)}


def _root_keys(full: CompiledPlan, roots: list[str], rows: set[str]) -> dict[tuple[str, str], str]:
    """The full plan's request key of each root step on the pilots' rows."""
    found: dict[tuple[str, str], str] = {}
    if not roots or not rows:
        return found
    for batch in full.iter_batches([ROW_KEY, *(req_column(step, "key") for step in roots)]):
        data = batch.to_pydict()
        for i, row in enumerate(data[ROW_KEY]):
            if str(row) in rows:
                found.update({(step, str(row)): data[req_column(step, "key")][i] for step in roots})
    return found
