"""What a run report shows, gathered from the state with aggregates and small samples in SQL.

The page must stay small for a 10-million-row run, so nothing here reads all rows into Python:
per-step counts, tokens, cost and latency quantiles are SQL aggregates; latency is a histogram of
at most ~24 log2 buckets; failures keep at most EXAMPLES rows per reason, samples SAMPLES rows per
step. Inputs beside the samples are read from the run's plan file by row key (streamed, filtered).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from batchor.errors import BatchorError
from batchor.state.base import StateStore
from batchor.state.raw import unpack

if TYPE_CHECKING:
    from batchor.state.base import StateStore

EXAMPLES = 3  # failing rows shown per (step, reason)
SAMPLES = 5  # answered rows shown per step
TEXT_CHARS = 1500  # raw model text kept per example


def gather(run_id: str | None, state: str | None, seed: int = 0) -> dict[str, Any]:
    """Everything the HTML and markdown reports render, as plain JSON-able data."""
    from batchor import operations
    from batchor.state import open_existing_state

    status = operations.status(run_id, state=state)
    store = open_existing_state(state)
    plan = _plan(status.get("plan_path"))
    job_id, run = status["job_id"], status["run_id"]
    steps = _in_pipeline_order(_steps(store, job_id, run), plan)
    for step in steps:
        step["cached"], step["saved_usd"] = store.cached_answers(job_id, run).get(step["step"], (0, 0.0))
    report: dict[str, Any] = {"run": status, "plan": _plan_summary(plan), "steps": steps}
    report["failures"] = _run_failures(store, status)
    report["profile"] = _profile(plan, store, seed)
    report["samples"] = (report["profile"] or {}).get("samples") or _samples(store, job_id, plan)
    report["checks"] = _checks(run, state)
    report["timezone"] = time.strftime("%Z") or "local time"
    return report


def _in_pipeline_order(steps: list[dict[str, Any]], plan: Any) -> list[dict[str, Any]]:
    """Steps as the plan runs them (the spec's order, dependencies first), not alphabetically."""
    if plan is None:
        return steps
    order = {s.name: i for i, s in enumerate(plan.header.steps)}
    return sorted(steps, key=lambda s: order.get(s["step"], len(order)))


def _profile(plan: Any, store: StateStore, seed: int) -> dict[str, Any] | None:
    """Answer values, seeded samples and flagged answers (quality/profile.py); None without the plan."""
    from batchor.quality.profile import answer_profile

    if plan is None:
        return None
    try:
        return answer_profile(plan, store, seed)
    except BatchorError:
        return None


def _plan(path: str | None) -> Any:
    from batchor.plan.plan_file import load_plan

    if not path or not Path(path).exists():
        return None
    try:
        return load_plan(Path(path))
    except BatchorError:  # a damaged or foreign plan: the report goes on without it
        return None


def _plan_summary(plan: Any) -> dict[str, Any] | None:
    if plan is None:
        return None
    h = plan.header
    return {
        "plan_id": h.plan_id,
        "file": str(plan.saved_path),
        "totals": h.totals.model_dump(),
        "budget_usd": h.limits.max_cost_usd,
        "spec_text": h.spec_text,
        "mocked": h.mocked,
        "steps": [
            {
                "name": s.name,
                "provider": s.provider,
                "model": s.model,
                "mode": s.mode,
                "mode_note": s.mode_note,
                "depends_on": list(s.depends_on or []),
                "prompt": s.prompt,
                "system": s.system,
                **s.counts.model_dump(),
            }
            for s in h.steps
        ],
    }


def _steps(store: StateStore, job_id: str, run_id: str) -> list[dict[str, Any]]:
    """Per step: rows by status, and this run's attempts: tokens, cost, re-asks, latency."""
    steps: dict[str, dict[str, Any]] = {}
    for step, rows, ok, failed in store.rows_by_status(job_id):
        steps[step] = {
            "step": step,
            "rows": int(rows),
            "succeeded": int(ok),
            "failed": int(failed),
            "pending": int(rows) - int(ok) - int(failed),
            "latency_histogram": [],
        }
    for step, *values in store.run_attempt_figures(job_id, run_id):
        names = (
            "attempts",
            "requests_sent",
            "reasked",
            "attempts_rejected",
            "input_tokens",
            "output_tokens",
            "cost_usd",
            "latency_p50_ms",
            "latency_p90_ms",
            "latency_p99_ms",
            "latency_max_ms",
        )
        entry = steps.setdefault(
            step, {"step": step, "rows": 0, "succeeded": 0, "failed": 0, "pending": 0, "latency_histogram": []}
        )
        entry.update(
            {n: (float(v) if v is not None and n.endswith(("_ms", "_usd")) else v) for n, v in zip(names, values)}
        )
    for step, bucket, n in store.run_latency_buckets(job_id, run_id):
        steps[step]["latency_histogram"].append(
            {"from_ms": 2 ** int(bucket), "to_ms": 2 ** (int(bucket) + 1), "attempts": int(n)}
        )
    return list(steps.values())


def _run_failures(store: StateStore, status: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's failed rows by (step, reason): the job's now, with examples, when the run is its
    job's latest; else the reasons and rows the run kept at its end, without examples (later runs
    have answered or changed those rows since)."""
    later = store.later_runs(status["job_id"], status["started_at"])
    kept = status.get("failed_rows_cost")
    if not later or kept is None:
        return _failures(store, status["job_id"])
    return [{"step": "(any step)", "reason": reason, "rows": v["rows"], "examples": []} for reason, v in kept.items()]


def _failures(store: StateStore, job_id: str) -> list[dict[str, Any]]:
    """Failed rows by (step, reason), with a few examples each and the raw answer of their last attempt."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for step, code, n in store.failed_by_reason(job_id):
        groups[(step, code)] = {"step": step, "reason": code, "rows": int(n), "examples": []}
    if not groups:
        return []
    for step, code, row_key, key, error in store.failed_examples(job_id, EXAMPLES):
        groups[(step, code)]["examples"].append({"row_key": row_key, "error": error, "raw": _last_raw(store, key)})
    return list(groups.values())


def _last_raw(store: StateStore, request_key: str) -> str | None:
    """The raw provider response of a request's last attempt that got one, cut to TEXT_CHARS."""
    raw = store.last_raw(request_key)
    if raw is None:
        return None
    try:
        text = unpack(raw).decode("utf-8", "replace")
    except (ValueError, OSError, BatchorError):
        return None
    return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + " ..."


def _samples(store: StateStore, job_id: str, plan: Any) -> list[dict[str, Any]]:
    """Per step, the first SAMPLES answered rows (by row key) with their answer and their input."""
    picked = store.answered_samples(job_id, SAMPLES)
    inputs = _inputs(plan, {row_key for _, row_key, _ in picked})
    return [
        {"step": step, "row_key": row_key, "answer": _answer(output), "input": inputs.get(row_key, {})}
        for step, row_key, output in picked
    ]


def _answer(output: str | None) -> Any:
    if output is None:
        return None
    try:
        return json.loads(output)
    except ValueError:
        return output


def _inputs(plan: Any, row_keys: set[str]) -> dict[str, dict[str, Any]]:
    """The input columns of these rows, streamed from the plan's data (never all of it in memory)."""
    if plan is None or not row_keys:
        return {}
    columns = [c for c in plan.data_columns() if not c.startswith("__")]
    wanted = pa.array(sorted(row_keys))
    found: dict[str, dict[str, Any]] = {}
    for batch in plan.iter_batches(columns=columns):
        table = pa.Table.from_batches([batch])
        table = table.filter(pc.is_in(table["_row_key"], value_set=wanted))
        for row in table.to_pylist():
            found[str(row.pop("_row_key"))] = row
        if len(found) == len(row_keys):
            break
    return found


def _checks(run_id: str, state: str | None) -> dict[str, Any] | None:
    from batchor import quality

    try:
        return quality.check(run_id, state=state).to_dict()
    except BatchorError:  # no checks in the spec, or its plan is gone: the report says nothing of them
        return None
