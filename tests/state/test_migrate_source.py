"""`batchor state migrate --from X` where X holds no state: `no_state`, and nothing is created,
neither X nor the target (copying from a missing file used to create both, then copy nothing)."""

from __future__ import annotations

import json

import pytest

from batchor.state.postgres_store import PostgresStore


def test_a_missing_source_file_is_no_state_and_creates_nothing(workdir, batchor_cli):
    missing, target = workdir / "old" / "state.duckdb", workdir / "new.duckdb"
    done = batchor_cli(workdir, "state", "migrate", "--from", missing, "--to", target, "--json")
    assert done.returncode == 1, done.stdout
    error = json.loads(done.stdout.strip().splitlines()[-1])
    assert error["code"] == "no_state" and str(missing) in error["message"], error
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in workdir.iterdir()) == []  # no source, no target, no .batchor/


@pytest.mark.postgres
def test_an_empty_database_as_source_is_no_state_and_stays_empty(workdir, pg_url, batchor_cli):
    target = workdir / "new.duckdb"
    done = batchor_cli(workdir, "state", "migrate", "--from", pg_url, "--to", target)
    assert done.returncode == 1 and "no_state" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not target.exists()
    assert PostgresStore(pg_url, migrate=False).schema_version() == 0  # not given batchor's schema
