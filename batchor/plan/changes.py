"""Which requests of a re-plan run because something changed, not because the rows are new.

A row is *changed* for a step when an earlier job of the same spec (same `name`, same state)
sent it a different request and the current request has no stored answer: the template, model,
params or the row's own values changed since then. The rest of `to_run` is new rows (never
sent by this spec) and retries of requests that failed. Only steps whose requests are rendered
at plan time are split this way; steps that depend on other steps render theirs during apply.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from batchor.duck import memory_db
from batchor.plan.model import StepPlan, req_column
from batchor.spec.inputs import ROW_KEY
from batchor.state.base import StateStore
from batchor.state.cache import cached_mask


def changed_rows(data_path: Path, step: StepPlan, state: StateStore, name: str, job_id: str) -> int:
    """How many of `step`'s requests to run replace an earlier, different request for their row."""
    now = pq.read_table(data_path, columns=[ROW_KEY, req_column(step.name, "key")])
    now = now.rename_columns(["row_key", "request_key"]).filter(pc.is_valid(now.column(1)))
    now = now.filter(pc.invert(cached_mask(state, now.column("request_key"))))
    if not now.num_rows:
        return 0
    previous = state.execute(
        "SELECT DISTINCT j.row_key, j.request_key FROM job_requests j WHERE j.step = ? AND j.job_id <> ? "
        "AND j.job_id IN (SELECT job_id FROM runs WHERE name = ?)", [step.name, job_id, name])
    if not previous:
        return 0
    before = pa.table({"row_key": pa.array([r[0] for r in previous], pa.string()),
                       "request_key": pa.array([r[1] for r in previous], pa.string())})
    with memory_db() as db:
        db.register("now", now)
        db.register("before", before)
        return int(db.sql(
            "SELECT count(DISTINCT n.request_key) FROM now n WHERE n.row_key IN (SELECT row_key FROM before) "
            "AND NOT EXISTS "
            "(SELECT 1 FROM before b WHERE b.row_key = n.row_key AND b.request_key = n.request_key)"
        ).fetchall()[0][0])
