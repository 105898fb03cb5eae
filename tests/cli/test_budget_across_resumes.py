"""A budget covers a job across its resumes: after a budget stop, the command printed to continue
(and any apply of the same job) spends only what the job's earlier runs left of it; raising the
budget is the one way to give the job more."""

from __future__ import annotations

import shlex
from pathlib import Path

import duckdb
import yaml
from conftest import make_spec

from batchor import api
from batchor.errors import EXIT_COST_LIMIT, exit_code_for_status

STATE = Path(".batchor") / "state.duckdb"


def spent(folder: Path) -> float:
    with duckdb.connect(str(folder / STATE), read_only=True) as db:
        return float(db.execute("SELECT coalesce(sum(cost_usd), 0) FROM attempts").fetchall()[0][0])


def with_cap(spec: Path, cap: float) -> None:
    data = yaml.safe_load(spec.read_text())
    data["limits"]["max_cost_usd"] = cap
    spec.write_text(yaml.safe_dump(data, sort_keys=False))


def test_the_printed_continue_command_does_not_grant_a_fresh_spec_budget(workdir, fake, batchor_cli):
    fake.configure(malformed=0.9, seed=5)  # most answers rejected: re-asks pass the plan's one-attempt bound
    spec = make_spec(workdir, rows=40, limits={"concurrency": 8, "max_attempts": 10, "request_timeout_s": 10})
    data = yaml.safe_load(spec.read_text())
    data["model"]["params"]["max_tokens"] = 20
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    cap = 2 * api.plan(spec, save=False).header.totals.cost_upper
    with_cap(spec, cap)

    first = batchor_cli(workdir, "apply", spec, "--yes")
    assert first.returncode == exit_code_for_status("budget"), first.stderr
    assert "limits.max_cost_usd" in first.stderr and "raise `limits.max_cost_usd` in the spec" in first.stderr
    after_first = spent(workdir)
    assert 0.5 * cap < after_first <= cap + 1e-12

    command = shlex.split(first.stderr.split("Command: ", 1)[1].splitlines()[0])
    again = batchor_cli(workdir, *command[1:])  # as printed: the job has no money left for the rest
    assert again.returncode == EXIT_COST_LIMIT, again.stderr
    assert "earlier runs spent" in again.stderr and "nothing was sent" in again.stderr
    assert spent(workdir) == after_first  # the job never ends above the spec's cap

    with_cap(spec, 50 * cap)  # raised explicitly: the job continues
    raised = batchor_cli(workdir, *command[1:])
    assert raised.returncode != EXIT_COST_LIMIT, raised.stderr
    assert spent(workdir) > after_first
