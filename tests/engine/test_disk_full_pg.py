"""A PostgreSQL state whose server runs out of disk during a run: sending stops at the first failed
write (`disk_full`), the answers bought meanwhile are stored once there is room, and the same apply
then pays only for what was not stored. A write that fails for another reason (the database turned
read-only) stops the run with `state_write_failed`.

The server's data directory sits on a small tmpfs mounted for the test (root only; skipped where
mounting is not allowed); a ballast file fills it up to a little room and is removed to free space."""

from __future__ import annotations

import os
import pwd
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import yaml

from batchor import api
from batchor.engine.events import Event
from batchor.errors import DiskFullError, StateWriteError
from tests import pg_server
from tests.conftest import make_spec
from tests.fakes.bill import fake_bill

pytestmark = pytest.mark.slow  # a PostgreSQL cluster of its own on a filesystem mounted for the test

ROWS = 1500
ROOM_KB = 1500  # what the ballast leaves: the run's bookkeeping fits, its answers do not


@pytest.fixture(scope="module")
def pg_cluster() -> Iterator[tuple[str, Path]]:
    """(server URL, ballast path): a cluster whose data directory is on a 64 MB tmpfs."""
    try:
        pg_server._run_as()
        base = Path(tempfile.mkdtemp(prefix="batchor-pgdisk-", dir=pg_server._base_dir()))
    except pg_server.PgUnavailable as exc:
        pytest.skip(f"no PostgreSQL server: {exc}")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(base)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    owner = pwd.getpwnam(pg_server.PG_USER)
    os.chown(base, owner.pw_uid, owner.pw_gid)
    try:
        try:
            url = pg_server.start(base / "cluster")
        except pg_server.PgUnavailable as exc:
            pytest.skip(f"no PostgreSQL server: {exc}")
        yield url, base / "ballast"
    finally:
        pg_server.stop(base / "cluster")
        subprocess.run(["umount", "-l", str(base)], check=False)


@pytest.fixture
def pg_small_disk(pg_cluster: tuple[str, Path]) -> Iterator[tuple[str, str, Path]]:
    """(server URL, a fresh database's URL, ballast path) on the cluster of the small disk."""
    server, ballast = pg_cluster
    state = pg_server.create_database(server)
    try:
        yield server, state, ballast
    finally:
        ballast.unlink(missing_ok=True)
        pg_server.drop_database(server, state)


def _fill(ballast: Path, leave_kb: int) -> None:
    """Fill the filesystem but `leave_kb` KB."""
    ballast.unlink(missing_ok=True)
    free = os.statvfs(ballast.parent)
    size = free.f_bavail * free.f_frsize - leave_kb * 1024
    with ballast.open("wb") as handle:
        handle.truncate(0)
        chunk = b"\0" * (1 << 20)
        while size > 0:
            handle.write(chunk[: min(size, len(chunk))])
            size -= len(chunk)


def _query(url: str, sql: str) -> tuple:
    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchone()


def _spec(folder: Path) -> Path:
    spec = make_spec(folder, rows=ROWS, schema=None, limits={"concurrency": 8, "request_timeout_s": 10})
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    data["model"]["params"]["max_tokens"] = 2000
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return spec


def test_a_full_server_disk_stops_buying_and_the_resume_pays_nothing_twice(workdir, fake, pg_small_disk):
    _, state, ballast = pg_small_disk
    fake.configure(text_words=[300, 0.1])  # long answers fill the disk quickly
    spec = _spec(workdir)
    api.plan(spec, state=state, save=False)  # the schema exists before the disk fills
    waited: list[dict] = []

    def free_space(event: Event) -> None:  # the user frees space while batchor waits
        if event.type == "disk_full_waiting":
            waited.append(event.data)
            ballast.unlink()

    _fill(ballast, ROOM_KB)
    with pytest.raises(DiskFullError) as failed:
        api.apply(spec, state=state, handle_signals=False, on_event=free_space)
    assert "sending stopped at the first failed write" in failed.value.message, failed.value.message
    stored, attempts, spent = _query(
        state,
        "SELECT (SELECT count(*) FROM results WHERE status = 'succeeded'), count(*), sum(cost_usd) FROM attempts",
    )
    bought = fake.stats()["answered"]
    assert 0 < stored < ROWS // 2, (stored, bought)  # stopped early, not at the end of the job
    assert waited and stored == attempts == bought  # what was in flight was stored once there was room
    assert spent == pytest.approx(fake_bill(fake.stats()), rel=1e-6)  # the ledger equals the bill

    fake.reset()
    done = api.apply(spec, state=state, handle_signals=False)
    assert fake.stats()["answered"] == ROWS - stored and done.cached == stored  # nothing paid twice


def test_a_state_that_turns_read_only_stops_the_run_with_a_coded_error(workdir, fake, pg_small_disk):
    server, state, _ = pg_small_disk
    spec = _spec(workdir)
    api.plan(spec, state=state, save=False)
    rows: list[dict] = []

    def read_only_after_some(row: dict) -> None:  # the server fails over to a read-only replica
        rows.append(row)
        if len(rows) == 50:
            with psycopg.connect(server, autocommit=True) as conn:
                conn.execute("ALTER SYSTEM SET default_transaction_read_only = on")
                conn.execute("SELECT pg_reload_conf()")

    try:
        with pytest.raises(StateWriteError) as failed:
            api.apply(spec, state=state, handle_signals=False, on_row=read_only_after_some)
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute("SET default_transaction_read_only = off")
            conn.execute("ALTER SYSTEM RESET default_transaction_read_only")
            conn.execute("SELECT pg_reload_conf()")
    assert failed.value.code == "state_write_failed" and "read-only" in failed.value.message, failed.value.message
    assert "sending stopped at the first failed write" in failed.value.message
    assert fake.stats()["answered"] < ROWS // 2  # it stopped sending, it did not die nor go on buying
