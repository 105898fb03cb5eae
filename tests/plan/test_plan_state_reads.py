"""Planning a small input reads the DuckDB state (history, cache, failures, changes) with the file
attached once, and leaves it free for other processes when the plan is made."""

from __future__ import annotations

from conftest import make_spec

from batchor import api
from batchor.state import duckdb_file


def _attaches_during(action) -> int:
    """How many times the process attached a state file while `action` ran (aliases are numbered)."""
    before = next(duckdb_file._HOST.aliases)
    action()
    return next(duckdb_file._HOST.aliases) - before - 1


def test_a_small_plan_attaches_the_state_once_for_all_its_reads(workdir):
    spec = make_spec(workdir, rows=5)
    api.apply(spec, mock=True, progress=False)  # history, answers and a job for the next plan to read
    spec.write_text(spec.read_text().replace("Classify.", "Classify this review."), encoding="utf-8")
    plan = None

    def replan() -> None:
        nonlocal plan
        plan = api.plan(spec, mock=True, save=False)

    assert _attaches_during(replan) == 2  # opening the state (its schema check), then the plan's reads
    assert plan is not None and plan.header.totals.changed == 5  # the reads happened: the prompt changed
    assert duckdb_file._HOST.attached == 0  # detached: another process may open the file
