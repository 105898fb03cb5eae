"""Spend read from the ledger of attempts (engine/recorder.py writes it): what a run paid, split
into accepted answers and wasted attempts (rejected: invalid, truncated, refused), what the
providers' prompt caches saved it, and what its failed rows cost. Portable SQL over
`store.execute`, so DuckDB and PostgreSQL answer alike.

Attempts stored before the ledger existed (schema < 4 / < 5) have no cost: they count as 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from batchor.state.cache_fees import run_cache_fees

if TYPE_CHECKING:
    from batchor.state.base import StateStore

# A billed attempt is one that got an answer (tokens), whatever became of it.
_BILLED = "(coalesce(input_tokens, 0) + coalesce(output_tokens, 0) > 0 OR coalesce(cost_usd, 0) > 0)"


def empty_spend() -> dict[str, Any]:
    return {
        "total_usd": 0.0,
        "accepted_usd": 0.0,
        "wasted_usd": 0.0,
        "estimated_usd": 0.0,
        "attempts_billed": 0,
        "attempts_rejected": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_saved_usd": 0.0,  # what the provider's prompt cache saved (writes billed above input count against it)
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "cache_fees_usd": 0.0,  # caches held apart from requests (Gemini explicit context caches): made and stored
        "caches_held": 0,
    }


def run_spend(store: StateStore, run_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Per run id: total, accepted, wasted and estimated USD, billed/rejected attempts, tokens, and
    the fees of the caches it held (in the total)."""
    spend = {run_id: empty_spend() for run_id in run_ids}
    if not run_ids:
        return spend
    marks = ", ".join("?" * len(run_ids))
    rows = store.execute(
        "SELECT run_id, outcome = 'ok', count(*), coalesce(sum(cost_usd), 0), "
        "coalesce(sum(CASE WHEN estimated THEN cost_usd ELSE 0 END), 0), coalesce(sum(input_tokens), 0), "
        "coalesce(sum(output_tokens), 0), coalesce(sum(uncached_usd - cost_usd), 0), "
        "coalesce(sum(cache_read_tokens), 0), coalesce(sum(cache_write_tokens), 0) "
        f"FROM attempts WHERE run_id IN ({marks}) AND {_BILLED} GROUP BY 1, 2",
        list(run_ids),
    )
    for run_id, accepted, count, cost, estimated, tokens_in, tokens_out, saved, read, written in rows:
        entry = spend[run_id]
        entry["total_usd"] += float(cost)
        entry["accepted_usd" if accepted else "wasted_usd"] += float(cost)
        entry["estimated_usd"] += float(estimated)
        entry["attempts_billed"] += int(count)
        entry["attempts_rejected"] += 0 if accepted else int(count)
        entry["input_tokens"] += int(tokens_in)
        entry["output_tokens"] += int(tokens_out)
        entry["cache_saved_usd"] += float(saved)
        entry["cache_read_tokens"] += int(read)
        entry["cache_write_tokens"] += int(written)
    for run_id, (fees, caches) in run_cache_fees(store, list(run_ids)).items():
        entry = spend[run_id]
        entry["total_usd"] += fees
        entry["cache_fees_usd"] += fees
        entry["caches_held"] += caches
        entry["cache_saved_usd"] -= fees  # what the cache saved, net of what holding it cost
    return spend


def failure_costs(store: StateStore, job_id: str) -> dict[str, dict[str, Any]]:
    """Per failure reason of a job's rows: how many rows, and what their attempts cost."""
    rows = store.execute(
        "SELECT r.error_code, count(*), coalesce(sum(r.cost_usd), 0) FROM job_requests j "
        "JOIN results r ON r.request_key = j.request_key WHERE j.job_id = ? AND r.status = 'failed' "
        "GROUP BY 1 ORDER BY 2 DESC",
        [job_id],
    )
    return {code or "unknown": {"rows": int(n), "cost_usd": float(cost)} for code, n, cost in rows}


def unfinished_job_spend(store: StateStore, job_id: str, *, skip_live: bool = False) -> tuple[float, int]:
    """What this job's runs since its last finished one spent, and how many runs that is.

    A budget covers a job across its resumes: a run stopped by its budget, interrupted, paused,
    failed by an error or killed leaves work a later apply finishes, and that apply's budget is
    what those runs left. A run is finished when it reached its end with no row pending (then a
    later apply is a new go: re-run failed rows, say). `skip_live` leaves out runs marked
    `running` (a shared state's live run, whose spend its own budget row holds)."""
    rows = store.execute(
        "SELECT run_id, status, rows_pending FROM runs WHERE job_id = ? ORDER BY started_at, run_id", [job_id]
    )
    since: list[str] = []
    for run_id, status, pending in rows:
        if status == "succeeded" or (status in ("partial", "failed") and pending == 0):
            since = []
        elif not (skip_live and status == "running"):
            since.append(run_id)
    spent = run_spend(store, since)
    return sum(s["total_usd"] for s in spent.values()), len(since)


def cached_answers(store: StateStore, job_id: str, run_id: str) -> dict[str, tuple[int, float]]:
    """Per step of a job: (rows answered before `run_id`, what those answers cost when they were
    paid): what the cache gave this run for free. Answers paid by the run itself are left out."""
    rows = store.execute(
        "SELECT j.step, count(*), coalesce(sum(r.cost_usd), 0) FROM job_requests j "
        "JOIN results r ON r.request_key = j.request_key WHERE j.job_id = ? AND r.status = 'succeeded' "
        "AND (r.run_id IS NULL OR r.run_id <> ?) GROUP BY j.step",
        [job_id, run_id],
    )
    return {str(step): (int(n), float(usd or 0.0)) for step, n, usd in rows}
