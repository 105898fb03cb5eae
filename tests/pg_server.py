"""A throwaway PostgreSQL server for the shared-state tests (and `.ci/run`, and the benchmark).

`BATCHOR_TEST_PG_URL` (a server URL whose user may CREATE DATABASE) wins; otherwise a cluster is
initialised in a temp dir with the PostgreSQL binaries on PATH (initdb, pg_ctl), run as a
non-root user (root creates the system user `batchor-pg` when missing), listening on a free
localhost port with its unix socket in the temp dir. Each test gets a fresh database.

As a script::

    python tests/pg_server.py start [PID]   # prints "URL DIR"; with PID, stops once PID has ended
    python tests/pg_server.py stop DIR
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

PG_USER = "batchor-pg"
URL_ENV = "BATCHOR_TEST_PG_URL"


class PgUnavailable(RuntimeError):
    """No PostgreSQL server could be started here."""


def _binary(name: str) -> str:
    found = shutil.which(name) or (f"/usr/local/bin/{name}" if Path(f"/usr/local/bin/{name}").exists() else None)
    if found is None:
        raise PgUnavailable(f"`{name}` not found on PATH (install PostgreSQL server binaries, or set {URL_ENV})")
    return found


def _run_as() -> list[str]:
    """Prefix that runs a command as a non-root user (PostgreSQL refuses to run as root)."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam(PG_USER)
    except KeyError:
        made = subprocess.run(
            [
                "useradd",
                "--system",
                "--home-dir",
                "/var/lib/batchor-pg",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                PG_USER,
            ],
            capture_output=True,
            text=True,
        )
        if made.returncode != 0:
            raise PgUnavailable(f"running as root and cannot create user {PG_USER}: {made.stderr.strip()}") from None
    runuser = shutil.which("runuser")
    return [runuser, "-u", PG_USER, "--"] if runuser else ["su", PG_USER, "-s", "/bin/sh", "-c"]


def _base_dir() -> Path:
    """Where clusters live: a temp dir, or (as root) the PostgreSQL user's home, since every parent
    must stay traversable by that user (a shared /tmp can lose its `x` bit to careless chmods)."""
    if os.geteuid() != 0:
        return Path(tempfile.gettempdir())
    owner = pwd.getpwnam(PG_USER)
    home = Path(owner.pw_dir if owner.pw_dir not in ("", "/") else "/var/lib/batchor-pg")
    home.mkdir(parents=True, exist_ok=True)
    os.chown(home, owner.pw_uid, owner.pw_gid)
    os.chmod(home, 0o700)
    return home


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _as_user(prefix: list[str], command: list[str]) -> list[str]:
    if prefix and prefix[0] == "su":
        return prefix + [" ".join(f"'{c}'" for c in command)]
    return prefix + command


def start(directory: Path) -> str:
    """Initialise and start a cluster in `directory`; returns its URL (user postgres, db postgres)."""
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    prefix = _run_as()
    directory.mkdir(parents=True, exist_ok=True)
    data, sock = directory / "data", directory / "sock"
    sock.mkdir(exist_ok=True)
    if prefix:
        owner = pwd.getpwnam(PG_USER)
        for path in (directory, sock):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    done = subprocess.run(
        _as_user(
            prefix, [initdb, "-D", str(data), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C"]
        ),
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise PgUnavailable(f"initdb failed: {(done.stderr or done.stdout).strip()[-500:]}")
    for _ in range(5):
        port = _free_port()
        options = (
            f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
            f"-c full_page_writes=off -c max_connections=200"
        )
        done = subprocess.run(
            _as_user(
                prefix,
                [pg_ctl, "-D", str(data), "-l", str(directory / "log"), "-w", "-t", "30", "-o", options, "start"],
            ),
            capture_output=True,
            text=True,
        )
        if done.returncode == 0:
            return f"postgresql://postgres@127.0.0.1:{port}/postgres"
    log = (directory / "log").read_text(errors="replace")[-800:] if (directory / "log").exists() else ""
    raise PgUnavailable(f"pg_ctl start failed: {done.stderr.strip()[-300:]} {log}")


def watch_owner(directory: Path, owner: int) -> None:
    """Stop the cluster in `directory` when process `owner` ends, even if it was killed (a detached
    watcher, so an interrupted test run leaves no server behind)."""
    subprocess.Popen(
        [sys.executable, __file__, "watch", str(directory), str(owner)],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _watch(directory: Path, owner: int) -> None:
    while directory.exists():
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            stop(directory)
            return
        except PermissionError:
            pass
        time.sleep(1.0)


def stop(directory: Path) -> None:
    data = directory / "data"
    if (data / "postmaster.pid").exists():
        subprocess.run(
            _as_user(_run_as(), [_binary("pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]),
            capture_output=True,
            text=True,
        )
    shutil.rmtree(directory, ignore_errors=True)


def _with_database(url: str, name: str) -> str:
    base, _, _ = url.rpartition("/")
    return f"{base}/{name}"


def create_database(server_url: str, prefix: str = "batchor_t") -> str:
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return _with_database(server_url, name)


def drop_database(server_url: str, url: str) -> None:
    import psycopg

    name = url.rpartition("/")[2]
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def server() -> Iterator[str]:
    """The server URL: BATCHOR_TEST_PG_URL, or a cluster started for the duration of the block."""
    given = os.environ.get(URL_ENV)
    if given:
        yield given
        return
    _run_as()  # as root: make sure the PostgreSQL user exists before using its home
    directory = Path(tempfile.mkdtemp(prefix="batchor-pg-", dir=_base_dir()))
    try:
        url = start(directory)
        watch_owner(directory, os.getpid())
        yield url
    finally:
        stop(directory)


def _wait_ready(url: str, timeout_s: float = 20.0) -> None:
    import psycopg

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            psycopg.connect(url, connect_timeout=2).close()
            return
        except psycopg.OperationalError as exc:
            if time.monotonic() > deadline:
                raise PgUnavailable(f"PostgreSQL at {url} does not answer: {exc}") from None
            time.sleep(0.2)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """URL of a running PostgreSQL server (skips the test when none can be had)."""
    try:
        with server() as url:
            _wait_ready(url)
            yield url
    except PgUnavailable as exc:
        pytest.skip(f"no PostgreSQL server: {exc}")


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """A fresh, empty database on the test server (dropped afterwards)."""
    url = create_database(pg_server)
    try:
        yield url
    finally:
        drop_database(pg_server, url)


def main(argv: list[str]) -> int:
    arity = {"start": (1, 2), "stop": (2,), "watch": (3,)}
    if not argv or len(argv) not in arity.get(argv[0], ()):
        print(__doc__, file=sys.stderr)
        return 64
    if argv[0] == "stop":
        stop(Path(argv[1]))
        return 0
    if argv[0] == "watch":
        _watch(Path(argv[1]), int(argv[2]))
        return 0
    try:
        _run_as()
        directory = Path(tempfile.mkdtemp(prefix="batchor-pg-", dir=_base_dir()))
        print(start(directory), directory, flush=True)
        if len(argv) == 2:
            watch_owner(directory, int(argv[1]))
    except PgUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
