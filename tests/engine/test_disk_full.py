"""A disk that fills up under the state: a clear `disk_full` error, every stored answer kept, and
the same command finishes the run once there is room (nothing answered twice).

A real filesystem runs out of space: a small tmpfs mounted for the test (root only; skipped
where mounting is not allowed)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import duckdb
import pytest
import yaml

from tests.cli.cli_helpers import cli_env, run_cli
from tests.conftest import write_csv
from tests.small_disk import small_disk  # noqa: F401 - the fixture

pytestmark = pytest.mark.slow  # signals, kills or large files: CI's full tier

ROWS = 20_000


def _spec(folder: Path) -> None:
    write_csv(
        folder / "data.csv", [{"id": f"r{i}", "text": f"review number {i} with a few words"} for i in range(ROWS)]
    )
    spec = {
        "name": "disk",
        "input": {"path": "data.csv", "key": "id"},
        "model": {"provider": "openai", "name": "gpt-4.1-mini", "params": {"max_tokens": 40}},
        "steps": {"label": {"prompt": "Label {{ row.text }}", "output": "text"}},
        "output": {"path": "out/results.csv"},
    }
    (folder / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))


def _stored(state: Path) -> int:
    with duckdb.connect(str(state), read_only=True) as db:
        return db.sql("SELECT count(*) FROM results WHERE status = 'succeeded'").fetchall()[0][0]


def _apply(folder: Path, state: Path) -> subprocess.CompletedProcess[str]:
    no_wait = cli_env(BATCHOR_DISK_WAIT_S="0")  # room never comes back while it waits
    return run_cli(folder, "apply", "spec.yaml", "--mock", "--yes", "--state", state, timeout=180, env=no_wait)


def test_a_full_disk_is_a_clear_error_and_the_run_finishes_once_there_is_room(workdir, small_disk):
    mount, resize = small_disk
    _spec(workdir)
    state = mount / "state.duckdb"

    too_small = _apply(workdir, state)  # 1 MB: not even the plan's bookkeeping fits
    assert too_small.returncode == 1 and "error [disk_full]" in too_small.stderr, too_small.stderr
    assert "Traceback" not in too_small.stderr and "fix: free disk space" in too_small.stderr

    # Grow the disk until it fills up in the middle of the run (sizes depend on DuckDB's blocks).
    stored = 0
    for size in ("6m", "8m", "10m", "12m", "14m"):
        resize(size, empty=True)
        done = _apply(workdir, state)
        if done.returncode == 0:
            pytest.fail(f"the run fit in {size}: no mid-run failure to check")
        assert "error [disk_full]" in done.stderr and "Traceback" not in done.stderr, done.stderr
        stored = _stored(state)
        if stored:
            break
    assert 0 < stored < ROWS, "the disk never filled up in the middle of the run"

    resize("64m")
    finished = _apply(workdir, state)
    assert finished.returncode == 0, finished.stderr
    assert f"{ROWS - stored:,} answered" in finished.stdout + finished.stderr
    assert f"{stored:,} rows cached" in finished.stdout + finished.stderr
    assert _stored(state) == ROWS
    lines = (workdir / "out" / "results.mock.csv").read_text(encoding="utf-8").splitlines()  # a --mock run
    assert len(lines) == ROWS + 1
