"""`batchor state migrate`: a DuckDB state moves to PostgreSQL (and back) in bulk, with its answers
still serving as the cache; repeating a migration adds nothing."""

from __future__ import annotations

import json

import pytest

from batchor import api, operations
from batchor.errors import StateError
from batchor.state import open_state
from tests.conftest import make_spec

pytestmark = pytest.mark.postgres

TABLES = ("runs", "results", "job_requests", "attempts")


def _cli_json(batchor_cli, folder, *args):
    done = batchor_cli(folder, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _rows(store, table: str) -> list[tuple]:
    return sorted(store.execute(f"SELECT * FROM {table}"), key=repr)


def test_migrate_duckdb_to_postgres_and_back(workdir, pg_url, batchor_cli):
    spec = make_spec(workdir, rows=30)
    api.apply(spec, mock=True, handle_signals=False)
    duck = workdir / ".batchor" / "state.duckdb"

    report = _cli_json(batchor_cli, workdir, "state", "migrate", "--from", duck, "--to", pg_url)  # the command, once
    assert {t: report["tables"][t]["added"] for t in TABLES} == {
        "runs": 1,
        "results": 30,
        "job_requests": 30,
        "attempts": 30,
    }
    again = operations.migrate_state(pg_url, str(duck))
    assert all(counts["added"] == 0 for counts in again["tables"].values())  # idempotent

    plan = api.plan(spec, mock=True, state=pg_url, save=False)  # the moved answers are the cache
    assert plan.header.totals.to_run == 0
    status = operations.status(state=pg_url)
    assert status["succeeded"] == 30 and status["workers"] == []

    back = workdir / "back.duckdb"
    operations.migrate_state(str(back), pg_url)
    source, copy = open_state(str(duck)), open_state(str(back))
    for table in TABLES:
        assert _rows(copy, table) == _rows(source, table), table


def test_migrate_without_from_only_prepares_the_schema(pg_url):
    report = operations.migrate_state(pg_url)
    assert report["schema_version"] >= 3 and "tables" not in report
    with pytest.raises(StateError, match="same state"):
        operations.migrate_state(pg_url, pg_url)
