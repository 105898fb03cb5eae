"""The spec's budget (`limits.max_cost_usd`) through the real CLI: enforced like --max-cost, the
lower of the two wins, the plan says which applies, and a run stopped by it exits 4."""

from __future__ import annotations

from pathlib import Path

import duckdb
import yaml
from conftest import make_spec

from batchor import api


def spec_with_cap(folder: Path, cap: float | None, **limits: float | int) -> Path:
    """40 structured rows of ~10 tokens under max_tokens 20: a worst case close to the real cost."""
    spec = make_spec(folder, rows=40)
    data = yaml.safe_load(spec.read_text())
    data["model"]["params"]["max_tokens"] = 20
    data["limits"].update(max_attempts=10, **limits)
    if cap is not None:
        data["limits"]["max_cost_usd"] = cap
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    return spec


def upper_bound(spec: Path) -> float:
    return api.plan(spec, save=False).header.totals.cost_upper


def recorded(folder: Path) -> float:
    with duckdb.connect(str(folder / ".batchor" / "state.duckdb"), read_only=True) as db:
        return float(db.execute("SELECT coalesce(sum(cost_usd), 0) FROM attempts").fetchall()[0][0])


def test_spec_cap_below_the_plan_bound_refuses_before_any_call(workdir, fake, batchor_cli):
    spec = spec_with_cap(workdir, None)
    spec = spec_with_cap(workdir, upper_bound(spec) / 2)
    result = batchor_cli(workdir, "apply", spec, "--yes")
    assert result.returncode == 4, result.stderr
    assert "above limits.max_cost_usd" in result.stderr
    assert "ABOVE budget; from limits.max_cost_usd" in result.stderr  # the plan says which budget applies
    assert fake.stats()["requests"] == 0


def test_the_lower_budget_wins_and_stops_the_run_with_exit_4(workdir, fake, batchor_cli):
    fake.configure(malformed=0.9, seed=5)  # re-asks cost far more than one attempt per row
    cap = upper_bound(spec_with_cap(workdir, None)) * 1.2
    spec = spec_with_cap(workdir, cap)
    result = batchor_cli(workdir, "apply", spec, "--yes", "--max-cost", "100")
    assert result.returncode == 4, result.stderr
    assert "limits.max_cost_usd in the spec, lower than --max-cost $100.00" in result.stderr
    assert "stopped: limits.max_cost_usd" in result.stderr and "reached" in result.stderr
    spent = recorded(workdir)
    assert 0.5 * cap < spent <= cap + 1e-12


def test_a_lower_max_cost_wins_over_the_spec(workdir, fake, batchor_cli):
    spec = spec_with_cap(workdir, None)
    bound = upper_bound(spec)
    spec = spec_with_cap(workdir, bound * 10)
    result = batchor_cli(workdir, "plan", spec, "--max-cost", f"{bound * 2:.8f}")
    assert result.returncode == 0, result.stderr
    assert "within budget; --max-cost, lower than the spec's limits.max_cost_usd" in result.stdout + result.stderr
    result = batchor_cli(workdir, "apply", spec, "--max-cost", f"{bound / 2:.8f}")
    assert result.returncode == 4 and "above --max-cost" in result.stderr


def test_a_tiny_budget_prints_as_decimal_dollars_never_1e_05(workdir, fake, batchor_cli):
    """Money is printed as money wherever a budget is named: the refusal, the plan, the stop."""
    spec = spec_with_cap(workdir, 0.00001)
    result = batchor_cli(workdir, "apply", spec, "--yes", "--max-cost", "0.00001")
    assert result.returncode == 4, result.stderr
    assert "above --max-cost $0.00001; nothing was sent" in result.stderr
    assert "lower than the spec's limits.max_cost_usd" not in result.stderr  # equal: --max-cost = the spec's
    result = batchor_cli(workdir, "plan", spec, "--max-cost", "0.0000001")
    assert "lower than the spec's limits.max_cost_usd $0.00001" in result.stdout + result.stderr
    assert fake.stats()["requests"] == 0
    for output in (result.stdout, result.stderr):
        assert "e-0" not in output
