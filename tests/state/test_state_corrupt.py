"""A damaged state file (truncated, or garbage bytes in the middle) is reported as `state_corrupt`
with a fix hint by every command, through the real CLI, never as a traceback; `batchor state check`
finds damage in the middle of the file that other commands may not touch."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import make_spec

from batchor import api
from batchor.state.base import RESULT_SCHEMA
from batchor.state.duckdb_store import DuckDBStore
from tests.cli.cli_helpers import run_cli

pytestmark = pytest.mark.slow  # signals, kills or large files: CI's full tier

STATE = Path(".batchor") / "state.duckdb"
FILLER = 120_000  # answers enough for the file to span many 256 KiB blocks


def commands(spec: Path) -> list[list[str]]:
    return [
        ["plan", str(spec)],
        ["apply", str(spec), "--mock", "--yes"],
        ["status"],
        ["runs"],
        ["export", "-o", "again.csv"],
        ["prune"],
        ["state", "check"],
    ]


@pytest.fixture
def healthy(workdir) -> Path:
    """A state with one finished run and enough stored answers to fill many blocks; its copy."""
    spec = make_spec(workdir, rows=5)
    api.apply(spec, mock=True, handle_signals=False)
    store = DuckDBStore(workdir / STATE)
    keys = pa.array([f"filler-{i}" for i in range(FILLER)])
    columns = {f.name: pa.nulls(FILLER, f.type) for f in RESULT_SCHEMA}
    columns.update(
        request_key=keys,
        status=pa.array(["succeeded"] * FILLER),
        output=pa.array([f"a stored answer, number {i}, " * 4 for i in range(FILLER)]),
    )
    store.record_results(pa.table(columns, schema=RESULT_SCHEMA))
    store.close()
    shutil.copy(workdir / STATE, workdir / "healthy.duckdb")
    return spec


def assert_reported(result, command) -> None:
    assert result.returncode == 1, (command, result.stdout, result.stderr)
    assert "error [state_corrupt]" in result.stderr, (command, result.stderr)
    assert "fix:" in result.stderr and "Traceback" not in result.stderr, (command, result.stderr)


def test_a_truncated_state_is_state_corrupt_for_every_command(workdir, healthy):
    data = (workdir / STATE).read_bytes()
    (workdir / STATE).write_bytes(data[: len(data) // 2])
    for command in commands(healthy):
        assert_reported(run_cli(workdir, *command, timeout=180), command)


def test_garbage_in_the_middle_is_found_by_state_check_and_never_a_traceback(workdir, healthy):
    assert run_cli(workdir, "state", "check", timeout=180).returncode == 0  # the healthy file passes
    path = workdir / STATE
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 65536] = b"\xab" * 65536
    path.write_bytes(bytes(data))
    check = run_cli(workdir, "state", "check", timeout=180)
    assert_reported(check, "state check")
    assert "table results" in check.stderr
    for command in commands(healthy):
        result = run_cli(workdir, *command, timeout=180)
        assert "Traceback" not in result.stderr, (command, result.stderr)
        if result.returncode != 0:  # a command that touches the damaged block says so
            assert_reported(result, command)
