"""The ledger of attempts against the fake over HTTP: every billed answer (accepted or rejected)
is recorded with its cost, spend equals what the fake billed, the budget counts re-asks, and the
realtime and batch executors record the same attempts for the same faults."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
import yaml
from conftest import make_spec

from batchor import api
from batchor.plan.prices import ModelPrice
from tests.engine.batch_helpers import FAST

STATE = Path(".batchor") / "state.duckdb"
LIMITS = {"concurrency": 8, "request_timeout_s": 10}


def query(workdir: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(workdir / STATE), read_only=True) as db:
        return db.execute(sql).fetchall()


def price_of(spec: Path) -> ModelPrice:
    step = api.plan(spec, save=False).header.steps[0]
    assert step.price is not None
    return ModelPrice.from_dict(step.price)


def billed_by_fake(fake, price: ModelPrice, batch: bool = False) -> float:
    stats = fake.stats()
    return price.cost(stats["input_tokens"], stats["output_tokens"], batch=batch)


def recorded(workdir: Path) -> float:
    return float(query(workdir, "SELECT coalesce(sum(cost_usd), 0) FROM attempts")[0][0])


@pytest.mark.parametrize("mode", ["realtime", "batch"])
def test_spend_equals_what_the_fake_billed_when_most_answers_are_invalid(workdir, fake, mode):
    fake.configure(malformed=0.7, seed=11)
    limits = {**LIMITS, **(FAST if mode == "batch" else {}), "max_attempts": 3}
    spec = make_spec(workdir, rows=30, limits=limits)
    result = api.apply(spec, handle_signals=False)
    assert result.failed > 0 and result.succeeded > 0
    billed = billed_by_fake(fake, price_of(spec), batch=mode == "batch")
    rejected = query(workdir, "SELECT count(*) FROM attempts WHERE outcome = 'invalid_output' AND cost_usd > 0")[0][0]
    assert rejected == fake.stats()["answered"] - result.succeeded  # every invalid answer is a billed attempt
    assert recorded(workdir) == pytest.approx(billed, rel=1e-9)
    assert result.cost_usd == pytest.approx(billed, rel=1e-9)
    assert result.wasted_usd > result.accepted_usd > 0  # most of the money went on rejected answers
    failed_cost = query(workdir, "SELECT sum(cost_usd), min(cost_usd) FROM results WHERE status = 'failed'")[0]
    assert failed_cost[1] > 0  # each failed row shows what its rejected attempts cost
    raws = query(workdir, "SELECT count(*) FROM attempts WHERE outcome = 'invalid_output' AND raw IS NULL")[0][0]
    assert raws == 0  # what the model said is kept for rejected answers too


def tight_spec(folder: Path, rows: int = 40) -> Path:
    """Structured answers of ~10 tokens under max_tokens 20: a worst case close to the real cost."""
    spec = make_spec(folder, rows=rows, limits={**LIMITS, "max_attempts": 10})
    data = yaml.safe_load(spec.read_text())
    data["model"]["params"]["max_tokens"] = 20
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    return spec


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_max_cost_below_the_billed_total_is_never_passed(workdir, fake, tmp_path_factory, monkeypatch):
    """The plan's bound is one attempt per request; re-asks are reserved and paid too, so a budget
    below what the re-asks cost stops the run before spend passes it."""
    fake.configure(malformed=0.9, seed=5)
    uncapped = api.apply(tight_spec(workdir), handle_signals=False)
    total = billed_by_fake(fake, price_of(tight_spec(workdir)))
    assert uncapped.cost_usd == pytest.approx(total, rel=1e-9)

    folder = tmp_path_factory.mktemp("capped")  # not below workdir: its .batchor/ would be this project's state
    monkeypatch.chdir(folder)
    fake.reset()
    spec = tight_spec(folder)
    cap = max(total / 2, api.plan(spec, save=False).header.totals.cost_upper)
    assert cap < total
    result = api.apply(spec, handle_signals=False, max_cost=cap)
    assert result.status == "budget" and "--max-cost" in (result.stop_reason or "")
    spent = recorded(folder)
    assert spent == pytest.approx(billed_by_fake(fake, price_of(spec)), rel=1e-9)
    assert spent <= cap + 1e-12, f"spent {spent} above the cap {cap} (overshoot {spent - cap})"
    assert spent > 0.5 * cap  # the budget went on re-asks before the run stopped


def test_realtime_and_batch_record_the_same_attempts(workdir, fake, tmp_path, monkeypatch):
    """Same rows, same faults (one invalid answer, then a valid one): one recorder, one ledger."""
    fake.configure(malformed_times=1)
    ledgers = {}
    for mode in ("realtime", "batch"):
        folder = tmp_path / mode
        folder.mkdir()
        monkeypatch.chdir(folder)
        fake.reset()
        limits = {**LIMITS, "max_attempts": 3, **(FAST if mode == "batch" else {})}
        spec = make_spec(folder, rows=6, limits=limits)
        result = api.apply(spec, handle_signals=False)
        assert (result.succeeded, result.failed) == (6, 0)
        rows = query(
            folder,
            "SELECT request_key, attempt, outcome, status_code, input_tokens, output_tokens, "
            "estimated, raw IS NOT NULL, cost_usd FROM attempts ORDER BY 1, 2",
        )
        price = price_of(spec)
        for row in rows:  # each attempt priced at its own mode's rate
            assert row[-1] == pytest.approx(price.cost(row[4], row[5], batch=mode == "batch"), rel=1e-9)
        ledgers[mode] = [row[:-1] for row in rows]
        assert recorded(folder) == pytest.approx(billed_by_fake(fake, price, batch=mode == "batch"), rel=1e-9)
        results = query(folder, "SELECT attempts, cost_usd > 0 FROM results")
        assert set(results) == {(2, True)}
    assert ledgers["realtime"] == ledgers["batch"]
    assert {r[2] for r in ledgers["realtime"]} == {"invalid_output", "ok"}
