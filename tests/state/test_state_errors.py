"""State files that batchor cannot use (newer schema, corrupt bytes) and outputs it cannot
write: clear errors, and answers already paid for are never lost."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pytest
from conftest import make_spec

from batchor import api
from batchor.errors import BatchorError
from batchor.state.migrations import SCHEMA_VERSION

STATE = Path(".batchor") / "state.duckdb"


def test_state_from_a_newer_batchor_is_refused(workdir, fake):
    spec = make_spec(workdir, rows=2)
    api.plan(spec, save=False)  # creates the state
    with duckdb.connect(str(workdir / STATE)) as db:
        db.execute(
            "UPDATE batchor_meta SET value = ? WHERE key = 'schema_version'",
            [str(SCHEMA_VERSION + 1)],
        )
    with pytest.raises(BatchorError) as info:
        api.apply(spec, handle_signals=False)
    assert info.value.code == "state_version"
    assert f"schema version {SCHEMA_VERSION + 1}" in info.value.message
    assert fake.stats()["requests"] == 0


@pytest.mark.parametrize("size", [4096, 300_000])
def test_corrupt_state_file_is_refused(workdir, fake, size):
    spec = make_spec(workdir, rows=2)
    (workdir / ".batchor").mkdir()
    (workdir / STATE).write_bytes(os.urandom(size))
    with pytest.raises(BatchorError) as info:
        api.apply(spec, handle_signals=False)
    assert info.value.code == "state_corrupt"
    assert str(STATE) in info.value.message and "--state" in (info.value.hint or "")
    assert fake.stats()["requests"] == 0


def test_output_path_that_is_a_directory_fails_before_any_call(workdir, fake):
    spec = make_spec(workdir, rows=4)
    (workdir / "out" / "results.csv").mkdir(parents=True)
    with pytest.raises(BatchorError) as info:
        api.apply(spec, handle_signals=False)
    assert info.value.code == "output_unwritable"
    assert "results.csv" in info.value.message
    assert fake.stats()["requests"] == 0


def test_output_unwritable_after_the_calls_keeps_results_in_state(workdir, fake):
    spec = make_spec(workdir, rows=4)
    target = workdir / "out" / "results.csv"

    def block_output(event):  # the output path turns into a folder while the run goes on
        if event.type == "run_started":
            target.mkdir(parents=True)

    with pytest.raises(BatchorError) as info:
        api.apply(spec, handle_signals=False, on_event=block_output)
    assert info.value.code == "output_unwritable"
    assert fake.stats()["requests"] == 4

    fake.reset()
    outcome = api.apply(spec, output=workdir / "fixed.csv", handle_signals=False)
    assert fake.stats()["requests"] == 0
    assert outcome.cached == 4
    lines = (workdir / "fixed.csv").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 5 and all(",succeeded," in line for line in lines[1:])
