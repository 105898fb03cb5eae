"""Operator views over the state: run status and history (read-only, safe during an apply)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from batchor.errors import RunNotFoundError
from batchor.state import open_state, state_location


def run_status(run_id: str | None, state: str | None) -> dict[str, Any]:
    store = open_state(state_location(state))
    run = store.get_run(run_id)
    if run is None:
        raise RunNotFoundError(f"no run {run_id!r} in state {store.location}" if run_id else
                               f"no runs yet in state {store.location}", hint="see `batchor runs`")
    data = {k: v for k, v in asdict(run).items() if k != "extra"}
    data["failures_by_reason"] = store.failures_by_reason(run.job_id)
    return data


def list_runs(state: str | None, limit: int = 20) -> list[dict[str, Any]]:
    store = open_state(state_location(state))
    return [{k: v for k, v in asdict(r).items() if k != "extra"} for r in store.list_runs(limit)]
