"""Helpers for the batch engine tests: a batch-mode spec, the fake's per-row submission counts,
the state's batch rows, and the CLI in a subprocess (for kills and fresh-process resumes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

from tests.cli.cli_helpers import cli_env, run_cli
from tests.conftest import make_spec

FAST = {"mode": "batch", "batch_poll_s": 0.01, "batch_poll_max_s": 0.05, "max_attempts": 3, "request_timeout_s": 10}


def batch_spec(folder: Path, rows: int = 20, **limits: Any) -> Path:
    return make_spec(folder, rows=rows, limits={**FAST, **limits})


def submitted(fake: Any) -> dict[str, int]:
    """custom_id (request key) -> how many created batches carried it."""
    return fake.stats()["batch_rows_by_id"]


def state_rows(folder: Path, sql: str) -> list[tuple]:
    db = duckdb.connect(str(folder / ".batchor" / "state.duckdb"), read_only=True)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def results(folder: Path) -> dict[str, tuple[str, str | None, int]]:
    """request key -> (status, error_code, attempts)."""
    rows = state_rows(folder, "SELECT request_key, status, error_code, attempts FROM results")
    return {k: (s, e, a) for k, s, e, a in rows}


def batches(folder: Path) -> list[tuple]:
    return state_rows(
        folder, "SELECT state, requests, succeeded, failed, requeued, remote_id FROM batches ORDER BY created_at"
    )


def cli(folder: Path, *args: Any, crash_at: str | None = None, timeout: float = 120):
    env = cli_env(BATCHOR_TEST_CRASH_AT=crash_at)
    return run_cli(folder, *args, env=env, timeout=timeout)


def key_of(folder: Path, row_id: str) -> str:
    rows = state_rows(folder, f"SELECT request_key FROM job_requests WHERE row_key = '{row_id}'")
    return rows[0][0]


def switch_after_first_collect(fake: Any, **changes: Any):
    """An on_event hook: reconfigure the fake once the first batch is collected."""
    done = []

    def on_event(event):
        if event.type == "batch_collected" and not done:
            done.append(event)
            fake.configure(**changes)

    return on_event
