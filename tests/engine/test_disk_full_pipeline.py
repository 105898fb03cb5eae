"""A pipelined step's row -> request map that cannot be written (the disk filled up) ends the run
as any failed state write does: `disk_full`, sending stopped at that write, the answers bought
before it stored, and the same apply later pays only for what was not stored.

The map is the only write that holds the rows' keys, so long keys make it the first write that
no longer fits: a ballast file leaves the small tmpfs (root only; skipped where mounting is not
allowed) room for the first step's answers but not for the second step's map."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import duckdb
import pytest
import yaml

from batchor import api
from batchor.engine.events import Event
from batchor.errors import DiskFullError
from tests.conftest import write_csv
from tests.small_disk import small_disk  # noqa: F401 - the fixture

ROWS = 6
pytestmark = pytest.mark.slow  # mounts a filesystem, fills it mid-run and resumes (about 5-9 s)

ROOM = 40 * 1024  # left free once the run starts: the first step's answers fit, one 64 kB key does not


def _spec(folder: Path) -> Path:
    rows = [{"id": f"r{i}-" + secrets.token_hex(32_000), "text": f"review {i}"} for i in range(ROWS)]
    write_csv(folder / "data.csv", rows)
    spec = {
        "version": 1,
        "name": "maps",
        "input": {"path": "data.csv", "key": "id"},
        "model": {"provider": "openai", "name": "gpt-4.1-mini", "params": {"max_tokens": 20}},
        "steps": {
            "first": {"prompt": "Review: {{ row.text }}", "output": "text"},
            "second": {"prompt": "Shorter: {{ first }}", "output": "text"},
        },
        "output": {"path": str(folder / "out" / "results.csv")},
        "keep_raw": False,
        "limits": {"concurrency": 2, "request_timeout_s": 10},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def _stored(state: Path) -> int:
    with duckdb.connect(str(state), read_only=True) as db:
        return db.sql("SELECT count(*) FROM results WHERE status = 'succeeded'").fetchall()[0][0]


def test_a_failed_row_map_write_stops_the_run_as_disk_full_and_resumes(workdir, fake, small_disk):
    mount, resize = small_disk
    resize("4m")
    spec, state, ballast = _spec(workdir), mount / "state.duckdb", mount / "ballast"
    fake.configure(latency_ms=20)

    def disk(event: Event) -> None:
        if event.type == "step_started" and event.data.get("step") == "first":  # its maps are written
            stat = os.statvfs(mount)
            ballast.write_bytes(b"\0" * max(stat.f_bavail * stat.f_frsize - ROOM, 0))
        elif event.type == "disk_full_waiting":  # the user frees space while answers wait in memory
            ballast.unlink()

    with pytest.raises(DiskFullError) as failed:
        api.apply(spec, state=str(state), handle_signals=False, on_event=disk)
    message = failed.value.message
    assert "row -> request map of second" in message and "sending stopped at the first failed write" in message
    bought, stored = fake.stats()["answered"], _stored(state)
    assert 0 < bought < 2 * ROWS and stored == bought  # stopped at the failure; what was bought is stored

    ballast.unlink(missing_ok=True)
    resize("64m")
    fake.reset()
    done = api.apply(spec, state=str(state), handle_signals=False)
    assert done.status == "succeeded" and fake.stats()["answered"] == 2 * ROWS - stored  # nothing paid twice
