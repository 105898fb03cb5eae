"""Schema setup on PostgreSQL: several processes opening a fresh database at once all succeed and
the migrations run once; a database from a newer batchor is refused with a clear message."""

from __future__ import annotations

import subprocess
import sys

import pytest

from batchor.errors import StateError, StateVersionError
from batchor.state import open_state
from batchor.state.pg_migrations import SCHEMA_VERSION
from tests.cli.cli_helpers import cli_env

pytestmark = pytest.mark.postgres

# Each process imports first, says so, then waits for the go file, so the opens really overlap.
OPEN = """
import os, sys, time
from batchor.state import open_state
print("ready", flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.005)
print(open_state(sys.argv[1]).schema_version())
"""


@pytest.mark.slow  # four processes racing to set up PostgreSQL (as the multi-worker PostgreSQL tests)
def test_concurrent_first_time_setup(pg_url, tmp_path):
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN, pg_url, str(go)],
            env=cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for proc in procs:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    go.touch()
    outputs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _, err in outputs]
    assert {out.strip() for out, _ in outputs} == {str(SCHEMA_VERSION)}
    store = open_state(pg_url)
    assert store.execute("SELECT version FROM batchor_migrations ORDER BY version") == [
        (v,) for v in range(1, SCHEMA_VERSION + 1)
    ]


def test_newer_schema_is_refused(pg_url):
    store = open_state(pg_url)
    store.execute("INSERT INTO batchor_migrations (version, name) VALUES (?, 'from the future')", [SCHEMA_VERSION + 1])
    with pytest.raises(StateVersionError, match="upgrade batchor"):
        open_state(pg_url)


def test_unreachable_server_names_the_fix():
    with pytest.raises(StateError) as caught:
        open_state("postgresql://nobody:secret@127.0.0.1:1/none")
    assert "secret" not in caught.value.message and "--state" in (caught.value.hint or "")
