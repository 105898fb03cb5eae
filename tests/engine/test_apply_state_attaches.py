"""A small apply keeps its DuckDB state attached from closing dead runs to the run's end, instead
of attaching the file (and checkpointing it as it detaches) for each of its steps: the run's
start, its scans, its flushes and its end. It still leaves the file free when it returns."""

from __future__ import annotations

import duckdb
from conftest import make_spec

from batchor import api
from batchor.state import duckdb_file


def _attaches_during(action) -> int:
    """How many times the process attached a state file while `action` ran (aliases are numbered)."""
    before = next(duckdb_file._HOST.aliases)
    action()
    return next(duckdb_file._HOST.aliases) - before - 1


def test_a_small_apply_attaches_its_state_once_and_frees_it_when_done(workdir, fake):
    spec = make_spec(workdir, rows=6)
    plan = api.plan(spec, save=False)
    outcomes = []

    def apply() -> None:
        outcomes.append(api.apply_compiled(plan, handle_signals=False))

    # Each step alone attaches (8 times); held across the apply, one attach (a second if the apply
    # outlasts the kept window of KEEP_ATTACHED_S on a busy machine, a third just after it).
    assert _attaches_during(apply) <= 3
    assert outcomes[0].status == "succeeded" and fake.stats()["requests"] == 6
    assert duckdb_file._HOST.attached == 0  # detached: another process may open the file
    db = duckdb.connect(str(workdir / ".batchor" / "state.duckdb"), read_only=True)
    try:
        assert db.execute("SELECT count(*) FROM results WHERE status = 'succeeded'").fetchall() == [(6,)]
        assert db.execute("SELECT status FROM runs").fetchall() == [("succeeded",)]
    finally:
        db.close()
