"""A disk that fills up during a run over HTTP: sending stops at the first failed state write
(`disk_full`), the answers stored before it stay stored (DuckDB's failed checkpoint invalidates the
file only in this process: what was committed is in its WAL), and once there is room the same apply
pays only for the rows not stored, each answer's attempt recorded once.

A real filesystem runs out of space: a small tmpfs mounted for the test (root only; skipped where
mounting is not allowed)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
import yaml

from batchor import api, operations
from batchor.engine.events import Event
from batchor.errors import DiskFullError
from tests.conftest import make_spec
from tests.fakes.bill import fake_bill
from tests.small_disk import small_disk  # noqa: F401 - the fixture

pytestmark = pytest.mark.slow  # mounts a filesystem and runs the job until it fills up mid-run

ROWS = 1500
CONCURRENCY = 8


SIZES = ("2200k", "2500k", "2800k", "3100k")  # DuckDB grows by blocks: one of them fills up mid-run


def _counts(state: Path) -> tuple[int, int]:
    """Succeeded answers and recorded attempts in the state, read as a new process would."""
    with duckdb.connect(str(state), read_only=True) as db:
        answers = db.sql("SELECT count(*) FROM results WHERE status = 'succeeded'").fetchall()[0][0]
        attempts = db.sql("SELECT count(*) FROM attempts").fetchall()[0][0]
    return answers, attempts


def _spec(folder: Path) -> Path:
    spec = make_spec(folder, rows=ROWS, schema=None, limits={"concurrency": CONCURRENCY, "request_timeout_s": 10})
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    data["model"]["params"]["max_tokens"] = 2000  # long answers, none cut off: every row succeeds
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return spec


def _ledger(state: Path) -> float:
    with duckdb.connect(str(state), read_only=True) as db:
        return db.sql("SELECT coalesce(sum(cost_usd), 0) FROM attempts").fetchall()[0][0]


def test_a_full_disk_stops_buying_and_the_resume_pays_only_for_what_was_not_stored(
    workdir, fake, small_disk, monkeypatch
):
    monkeypatch.setenv("BATCHOR_DISK_WAIT_S", "0")  # no room comes back: the answers in memory are given up
    mount, resize = small_disk
    # long answers (their raw payloads fill the state quickly), at most 8 / 40 ms = 200 a second: what is
    # bought while the first failing write runs is bounded by the rate, not by how fast this machine is
    fake.configure(text_words=[300, 0.1], latency_ms=40)
    spec, state = _spec(workdir), mount / "state.duckdb"
    stored = 0
    for size in SIZES:
        resize(size, empty=True)
        fake.reset()
        with pytest.raises(DiskFullError) as failed:  # at the start (too small for the job's bookkeeping) or mid-run
            api.apply(spec, state=str(state), handle_signals=False)
        stored, attempts = _counts(state)
        if stored:
            break
    assert 0 < stored < ROWS, "the disk never filled up in the middle of the run"
    assert "sending stopped at the first failed write" in failed.value.message, failed.value.message
    assert "free disk space" in (failed.value.hint or "")
    bought = fake.stats()["answered"]
    # Only answers in flight or buffered when the first write failed are bought and not stored: the
    # calls open then and one flush interval's answers (0.25 s at the fake's rate; more when the
    # machine is loaded and the failing flush is slow), never the rest of the job (1,500 rows).
    assert bought - stored <= ROWS // 10, (bought, stored)
    assert attempts == stored  # the ones stored by a commit whose checkpoint failed are not written twice

    resize("256m", empty=False)
    fake.reset()
    done = api.apply(spec, state=str(state), handle_signals=False)
    assert fake.stats()["answered"] == ROWS - stored  # nothing stored before the stop is paid again
    assert done.cached == stored and done.succeeded == ROWS - stored
    assert _counts(state) == (ROWS, ROWS)
    assert operations.check_state(str(state))["ok"]


def test_answers_bought_when_the_disk_fills_wait_in_memory_until_there_is_room(workdir, fake, small_disk):
    """The answers in flight when the first write fails are stored once space is freed while the
    run waits: the ledger equals what the provider billed, and nothing bought is asked again."""
    mount, resize = small_disk
    fake.configure(text_words=[300, 0.1])
    spec, state = _spec(workdir), mount / "state.duckdb"
    waited: list[dict] = []

    def free_space(event: Event) -> None:  # the user frees space while batchor waits
        if event.type == "disk_full_waiting":
            waited.append(event.data)
            resize("256m")

    for size in SIZES:
        resize(size, empty=True)
        fake.reset()
        waited.clear()
        with pytest.raises(DiskFullError) as failed:
            api.apply(spec, state=str(state), handle_signals=False, on_event=free_space)
        stored, attempts = _counts(state)
        if stored:
            break
    assert 0 < stored < ROWS, "the disk never filled up in the middle of the run"
    assert waited and waited[0]["unstored"] > 0, "no answer was in memory when the disk filled"
    assert "could not be stored" not in failed.value.message, failed.value.message
    bought = fake.stats()["answered"]
    assert stored == attempts == bought  # every answer bought is stored, its attempt once
    assert _ledger(state) == pytest.approx(fake_bill(fake.stats()), rel=1e-6)

    fake.reset()
    done = api.apply(spec, state=str(state), handle_signals=False)
    assert fake.stats()["answered"] == ROWS - stored and done.cached == stored
