"""Which requests of a re-plan run because something changed, not because the rows are new.

A row is *changed* for a step when an earlier job of the same spec (same `name`, same state)
sent it a different request and the current request has no stored answer: the template, model,
params or the row's own values changed since then. The rest of `to_run` is new rows (never
sent by this spec) and retries of requests that failed. Only steps whose requests are rendered
at plan time are split this way; steps that depend on other steps render theirs during apply.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from batchor.duck import SMALL_ROWS, scratch_db
from batchor.plan.model import PROJECTED, PlanHeader, StepPlan, req_column
from batchor.plan.plan_file import HEADER_MEMBER
from batchor.spec.inputs import ROW_KEY
from batchor.state.base import StateStore
from batchor.state.cache import cached_mask


def changes_by_cause(data_path: Path, step: StepPlan, state: StateStore, name: str, job_id: str) -> dict[str, int]:
    """How many of `step`'s requests to run replace an earlier, different request for their row, by
    cause: what differs between this step and the one of the latest earlier plan that sent the row
    (template, model, params, schema), or `row values` when the step is the same."""
    if not _sent_before(state, step, name, job_id):  # a first plan reads no keys (1M rows: ~140 MB)
        return {}
    now = pq.read_table(data_path, columns=[ROW_KEY, req_column(step.name, "key"), req_column(step.name, "tokens")])
    runs = pc.is_valid(now.column(1))
    if step.context_window is not None:  # over the window: fails without a call, never runs (plan/render.py)
        fits = pc.less_equal(now.column(2), step.context_window - step.max_tokens)
        runs = pc.and_(runs, pc.fill_null(fits, False))
    now = now.select([0, 1]).rename_columns(["row_key", "request_key"]).filter(runs)
    return rendered_changes(now, step, state, name, job_id)


def rendered_changes(now: pa.Table, step: StepPlan, state: StateStore, name: str, job_id: str) -> dict[str, int]:
    """`changes_by_cause` for the rendered requests in `now` (row_key, request_key): the ones
    without a stored answer whose row got another request from an earlier job of this spec."""
    if not _sent_before(state, step, name, job_id):
        return {}
    now = now.filter(pc.invert(cached_mask(state, now.column("request_key"))))
    if not now.num_rows:
        return {}
    before, plans = _earlier_requests(state, step, name, job_id)
    if before is None:
        return {}
    with scratch_db(now.num_rows + before.num_rows <= SMALL_ROWS) as db:
        db.register("now", now)
        db.register("before", before)
        by_job = db.sql(_CHANGED_BY_JOB).fetchall()
    return _tally_causes(step, plans, by_job)


def projected_changes(
    row_keys: pa.ChunkedArray, step: StepPlan, state: StateStore, name: str, job_id: str
) -> dict[str, int]:
    """Rows of a step whose upstream answers are not known yet (so their requests cannot be
    rendered) that an earlier job of this spec answered: they are asked again, for certain when
    the step itself changed (cause: what differs), else if an upstream answer turns out different
    (cause: `upstream`). Counted per row, marked projected. A row ending in `#*` stands for the
    elements of a fan-out not known yet: the earlier element rows under it are counted."""
    if not len(row_keys):
        return {}
    before, plans = _earlier_requests(state, step, name, job_id)
    if before is None:
        return {}
    with scratch_db(len(row_keys) + before.num_rows <= SMALL_ROWS) as db:
        db.register("projected", pa.table({"row_key": row_keys}))
        db.register("before", before)
        by_job = db.sql(_PROJECTED_BY_JOB).fetchall()
    causes = _tally_causes(step, plans, by_job, unchanged="upstream")
    return {f"{cause}{PROJECTED}": n for cause, n in causes.items()}


def _sent_before(state: StateStore, step: StepPlan, name: str, job_id: str) -> bool:
    """Whether an earlier job of the spec sent this step any request (else nothing changed)."""
    return state.sent_before(name, step.name, job_id)


def _earlier_requests(
    state: StateStore, step: StepPlan, name: str, job_id: str
) -> tuple[pa.Table | None, dict[str, tuple[int, str | None]]]:
    """(row_key, request_key, job_id, recency) of the step's requests in earlier jobs of the spec."""
    previous = state.earlier_requests(name, step.name, job_id)
    if not previous:
        return None, {}
    plans = _latest_plans(state, name)
    before = pa.table(
        {
            "row_key": pa.array([r[0] for r in previous], pa.string()),
            "request_key": pa.array([r[1] for r in previous], pa.string()),
            "job_id": pa.array([r[2] for r in previous], pa.string()),
            "recency": pa.array([plans.get(r[2], (0, None))[0] for r in previous], pa.int64()),
        }
    )
    return before, plans


def _tally_causes(
    step: StepPlan, plans: dict[str, tuple[int, str | None]], by_job: list[Any], unchanged: str = "row values"
) -> dict[str, int]:
    causes: dict[str, int] = {}
    for earlier_job, count in by_job:
        cause = _cause(step, plans.get(earlier_job, (0, None))[1], unchanged)
        causes[cause] = causes.get(cause, 0) + int(count)
    return dict(sorted(causes.items()))


# Each changed request once, attributed to the latest earlier job that sent its row another request.
_CHANGED_BY_JOB = """
WITH changed AS (
    SELECT n.row_key, n.request_key FROM now n WHERE n.row_key IN (SELECT row_key FROM before)
    AND NOT EXISTS (SELECT 1 FROM before b WHERE b.row_key = n.row_key AND b.request_key = n.request_key)),
latest AS (
    SELECT c.request_key, arg_max(b.job_id, b.recency) AS job_id
    FROM changed c JOIN before b ON b.row_key = c.row_key GROUP BY c.request_key)
SELECT job_id, count(*) FROM latest GROUP BY job_id
"""

# Each earlier row under a projected row once (its own key, or its elements under `<row>#*`),
# attributed to the latest earlier job that sent it a request.
_PROJECTED_BY_JOB = """
WITH under AS (
    SELECT b.row_key, arg_max(b.job_id, b.recency) AS job_id FROM before b JOIN projected p
    ON b.row_key = p.row_key OR (p.row_key LIKE '%#*' AND starts_with(b.row_key, left(p.row_key, -1)))
    GROUP BY b.row_key)
SELECT job_id, count(*) FROM under GROUP BY job_id
"""


def _latest_plans(state: StateStore, name: str) -> dict[str, tuple[int, str | None]]:
    """job_id -> (recency rank, plan file of its latest run)."""
    runs = state.job_runs_of(name)
    return {job: (rank, path) for rank, (job, path, _) in enumerate(runs)}


def _cause(step: StepPlan, plan_path: str | None, unchanged: str = "row values") -> str:
    earlier = _earlier_step(plan_path, step.name)
    if earlier is None:
        return "unknown (earlier plan file gone)"
    return "+".join(step_differences(step, earlier)) or unchanged


def step_differences(step: StepPlan, earlier: StepPlan) -> list[str]:
    """What of the request's definition differs between two pins of a step: template, model, params, schema."""
    return [cause for cause, fields in _CAUSES if any(getattr(step, f) != getattr(earlier, f) for f in fields)]


_CAUSES = (
    ("template", ("system", "prompt")),
    ("model", ("provider", "model", "endpoint", "api")),
    ("params", ("params",)),
    ("schema", ("sent_schema", "strict")),
)


def _earlier_step(plan_path: str | None, name: str) -> StepPlan | None:
    """The step as an earlier plan pinned it (its header only: the data is not read)."""
    if not plan_path:
        return None
    try:
        with zipfile.ZipFile(plan_path) as archive:
            header = PlanHeader.model_validate(json.loads(archive.read(HEADER_MEMBER)))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None
    return next((s for s in header.steps if s.name == name), None)


def changed_samples(plan: Any, step: StepPlan, state: StateStore, count: int) -> list[dict[str, Any]]:
    """Up to `count` changed rows of a plan-time step: the request an earlier plan of this spec sent
    for the row (model, params, schema and messages; None when its plan file is gone) and the one
    this plan will send."""
    name, job_id = plan.header.name, plan.job_id
    previous = state.earlier_requests(name, step.name, job_id, distinct=False)
    plans = _latest_plans(state, name)
    latest: dict[str, tuple[str, str]] = {}
    for row_key, key, job in sorted(previous, key=lambda r: plans.get(r[2], (0, None))[0]):
        latest[row_key] = (key, job)
    samples: list[dict[str, Any]] = []
    columns = [ROW_KEY, req_column(step.name, "key"), req_column(step.name, "messages")]
    for batch in plan.iter_batches(columns):
        for row_key, key, body in zip(*(batch.column(i).to_pylist() for i in range(3)), strict=True):
            before = latest.get(row_key)
            if key is None or before is None or before[0] == key or len(samples) >= count:
                continue
            earlier_plan = plans.get(before[1], (0, None))[1]
            samples.append(
                {
                    "row_key": row_key,
                    "after": request_view(step, json.loads(body)),
                    "before": _earlier_request(earlier_plan, step.name, row_key),
                }
            )
        if len(samples) >= count:
            break
    return samples


def request_view(step: StepPlan, messages: Any) -> dict[str, Any]:
    """What decides a step's request, for a diff: model, params, schema sent, and the messages
    (or, for a step rendered during apply, its templates)."""
    view: dict[str, Any] = {"model": f"{step.provider}:{step.model}"}
    view |= {k: v for k, v in (("endpoint", step.endpoint), ("api", step.api)) if v}
    view |= {"params": step.params, "schema": step.sent_schema, "strict": step.strict}
    if messages is None:
        return view | {"system": step.system, "prompt": step.prompt}
    return view | {"messages": messages}


def changed_settings(plan: Any, step: StepPlan, state: StateStore) -> dict[str, Any] | None:
    """A step rendered during apply: its settings and templates in the latest earlier plan of this
    spec that ran it, and now (None when no earlier plan of it is left)."""
    before, plans = _earlier_requests(state, step, plan.header.name, plan.job_id)
    if before is None:
        return None
    latest = max(before.column("job_id").to_pylist(), key=lambda job: plans.get(job, (0, None))[0])
    earlier = _earlier_step(plans.get(latest, (0, None))[1], step.name)
    return (
        None
        if earlier is None
        else {"row_key": None, "before": request_view(earlier, None), "after": request_view(step, None)}
    )


def _earlier_request(plan_path: str | None, step: str, row_key: str) -> dict[str, Any] | None:
    earlier = _earlier_step(plan_path, step)
    messages = _earlier_messages(plan_path, step, row_key)
    return None if earlier is None or messages is None else request_view(earlier, messages)


def _earlier_messages(plan_path: str | None, step: str, row_key: str) -> Any:
    from batchor.plan.plan_file import load_plan

    if not plan_path:
        return None
    try:
        earlier = load_plan(Path(plan_path))
        for batch in earlier.iter_batches([ROW_KEY, req_column(step, "messages")]):
            for key, body in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
                if key == row_key and body is not None:
                    return json.loads(body)
    except (OSError, KeyError, ValueError):
        return None
    return None
