"""How many pilot rows bring the whole job within +-10 % (batchor/pilot/size.py), and larger pilots
of the same seed that hold the smaller one's rows (nested: `--pilot 150` after `--pilot 20` pays
only the new rows). Real openai SDK against the fake, requests counted there."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from typer.testing import CliRunner

from batchor.cli.main import app
from batchor.pilot import pilot_plan, run_auto, run_pilot, top_up_bound
from batchor.state import open_state
from tests.conftest import make_spec
from tests.test_pilot import tickets


def long_answers(folder, rows: int = 400):
    """Free-text answers of widely spread lengths (the fake's log-normal word counts, sigma 1.0)."""
    path = make_spec(folder, rows=rows, schema=None)
    spec = yaml.safe_load(path.read_text())
    spec["model"]["params"]["max_tokens"] = 2000  # no answer cut by its limit
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def pilot_rows(workdir, run_ids: list[str]) -> set[str]:
    """Input rows the pilot's runs' jobs held (its sample and its top-up's rows)."""
    store = open_state(str(workdir / ".batchor" / "state.duckdb"))
    marks = ", ".join("?" * len(run_ids))
    found = {
        str(k)
        for (k,) in store.execute(
            "SELECT DISTINCT j.row_key FROM job_requests j JOIN runs r "
            f"ON r.job_id = j.job_id WHERE r.run_id IN ({marks})",
            run_ids,
        )
    }
    store.close()
    return found


def run_ids(result) -> list[str]:
    return [result.outcome.run_id, *(t.outcome.run_id for t in result.top_ups)]


def test_the_plan_says_how_many_pilot_rows_bring_the_whole_job_within_10_percent(fake, workdir):
    """20 answers of widely spread lengths leave the whole job's interval wider than +-10 %: the
    plan names the pilot that would narrow it and what its extra rows cost at most; run, that
    pilot (the same seed) sends only its new rows, and they cost no more than said."""
    fake.configure(text_words=[40, 1.0])
    spec = long_answers(workdir)
    result = CliRunner().invoke(app, ["plan", str(spec), "--pilot", "20", "--yes"])
    assert result.exit_code == 0, result.output
    line = re.search(
        r"pilot size  a pilot of ~([\d,]+) rows would bring this within \+-10% \((.+)\) "
        r"\(([\d,]+) more rows, at most \$([\d.]+); cached, part of the job\)",
        result.output,
    )
    assert line, result.output
    rows, more, upper = int(line[1]), int(line[3]), float(line[4])
    assert 20 < rows <= 200 and more == rows - 20 and upper > 0
    assert result.output.index("whole job") < result.output.index("pilot size") < result.output.rindex("step classify")
    now = re.search(r"whole job   .* 90% interval .* \(-(\d+)% / \+(\d+)%\)", result.output)
    assert now and max(int(now[1]), int(now[2])) > 10  # wider than +-10 % now
    ends = re.findall(r"(\d+)%", line[2])
    assert max(int(end) for end in ends) <= 10  # within it at that pilot
    larger = run_pilot(spec, rows, handle_signals=False)
    assert fake.stats()["requests"] - 20 == larger.calls == more  # only the new rows: the 20 are its first
    assert larger.cost_usd <= upper


def test_where_no_pilot_reaches_10_percent_the_plan_says_why(fake, workdir):
    """40 rows of widely spread answers: the rest's own spread alone is wider than +-10 %, however
    well a pilot measures their mean."""
    fake.configure(text_words=[40, 1.0])
    result = run_pilot(long_answers(workdir, rows=40), 10, handle_signals=False)
    size = result.size
    assert size is not None and not size.within and size.rows is None
    assert "the rest's own spread alone is" in size.reason
    assert size.text().startswith("no pilot of at most half the input brings this within +-10%")
    assert size.to_dict()["reachable"] is False


def test_plan_pilot_json_says_whether_the_whole_job_is_within_10_percent(fake, workdir):
    # short structured answers, never asked again: within after 20 rows (with re-asks allowed and none
    # seen in 20 first asks, up to 3/20 asked again stays possible above: tests/test_pilot_reasks.py)
    spec = make_spec(workdir, rows=60, limits={"concurrency": 8, "max_attempts": 1, "request_timeout_s": 10})
    result = CliRunner().invoke(app, ["plan", str(spec), "--pilot", "20", "--yes", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout.splitlines()[-1])
    size, (expected, (low, high)) = data["pilot"]["size"], data["calibration"]["job"].values()
    assert size["target"] == 0.1 and size["within"] and size["rows_needed"] is None and size["more_rows"] == 0
    assert size["interval_ends"] == pytest.approx([(expected - low) / expected, (high - expected) / expected])
    assert max(size["interval_ends"]) <= 0.1 and size["reachable"]


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_a_larger_pilot_of_the_same_seed_holds_the_smaller_ones_rows_stratified_top_up_included(fake, workdir):
    """The `when:` reads only the row: each pilot's top-up draws rows where it holds. The larger
    pilot's rows (its sample and its top-up's) hold every row of the smaller one, so it pays only
    for rows the smaller one did not answer: no request is sent twice."""
    spec = tickets(workdir, rows=1000)  # more rows than the smaller pilot's top-up looks through (20 x 20)
    small = run_pilot(spec, 20, handle_signals=False)
    assert small.stratified is not None and small.top_ups
    before = fake.stats()["requests"]
    large = run_pilot(spec, 40, handle_signals=False)
    assert large.stratified is not None and large.top_ups
    small_rows, large_rows = pilot_rows(workdir, run_ids(small)), pilot_rows(workdir, run_ids(large))
    assert small_rows < large_rows
    store = open_state(str(workdir / ".batchor" / "state.duckdb"))
    sent, distinct = store.execute("SELECT count(*), count(DISTINCT request_key) FROM attempts")[0]
    store.close()
    assert fake.stats()["requests"] - before == large.calls and sent == distinct == fake.stats()["requests"]


@pytest.mark.parametrize("seed", [0, 3])
def test_a_larger_plain_sample_of_the_same_seed_starts_with_the_smaller_ones_rows(fake, workdir, seed):
    spec = long_answers(workdir, rows=100)
    small = run_pilot(spec, 10, seed=seed, handle_signals=False)
    large = run_pilot(spec, 30, seed=seed, handle_signals=False)
    assert pilot_rows(workdir, run_ids(small)) < pilot_rows(workdir, run_ids(large))
    assert fake.stats()["requests"] == 30 == small.calls + large.calls


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_larger_pilots_stratified_top_up_rows_hold_the_smaller_ones(workdir, seed):
    """Whatever a top-up round draws (its first k rows where the `when:` holds), a pilot of 40 rows
    of the same seed drawing as many holds the pilot of 20's rows: the rows where it holds are
    taken in the sample's one seeded order, not in an order of their own per scan."""
    spec = tickets(workdir, rows=1000)
    options = {"state": None, "model": None, "mock": True, "mode": None, "seed": seed}
    small, large = (top_up_bound(spec, pilot_plan(spec, n, seed=seed, mock=True), options)[1] for n in (20, 40))
    assert small is not None and large is not None and len(large.candidates) > len(small.candidates) > 20
    for k in range(len(small.candidates) + 1):
        assert set(small.keys(k)) <= set(large.keys(k))


def _ledger_cost(workdir) -> float:
    store = open_state(str(workdir / ".batchor" / "state.duckdb"))
    ((cost,),) = store.execute("SELECT sum(cost_usd) FROM attempts")
    store.close()
    return float(cost)


def test_a_second_pilot_counts_the_first_ones_spend_in_the_whole_job(fake, workdir):
    """`--pilot 60` after `--pilot 20` (the same seed): the 20 rows are cached in it and part of
    the job, so the whole job (and the pilot size it reads) counts what they cost, from the ledger."""
    fake.configure(text_words=[40, 1.0])
    spec = long_answers(workdir, rows=200)
    small = run_pilot(spec, 20, handle_signals=False)
    large = run_pilot(spec, 60, handle_signals=False)
    assert large.calls == 40 and large.cost_usd < _ledger_cost(workdir)  # it paid only its new rows
    calibration = large.calibration
    assert calibration.spent == pytest.approx(small.cost_usd + large.cost_usd) == pytest.approx(_ledger_cost(workdir))
    assert calibration.job[0] == pytest.approx(calibration.spent + calibration.expected)
    assert large.size is not None and large.size.ends == pytest.approx(
        (
            (calibration.job[0] - calibration.job[1]) / calibration.job[0],
            (calibration.job[2] - calibration.job[0]) / calibration.job[0],
        )
    )


def test_a_pilot_of_an_earlier_prompt_is_not_part_of_the_job(fake, workdir):
    spec = long_answers(workdir, rows=100)
    run_pilot(spec, 20, handle_signals=False)
    data = yaml.safe_load(spec.read_text())
    data["steps"]["classify"]["prompt"] = "Another review: {{ row.text }}"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    again = run_pilot(spec, 20, handle_signals=False)
    assert again.calls == 20 and again.cost_usd > 0 and again.calibration.spent == pytest.approx(again.cost_usd)
    assert again.calibration.spent < _ledger_cost(workdir)


def test_an_auto_pilots_rounds_are_counted_once(fake, workdir):
    fake.configure(text_words=[40, 1.0])
    auto = run_auto(long_answers(workdir, rows=400), handle_signals=False)
    assert len(auto.rounds) > 1  # it grew: its last round's sample holds the earlier rounds' rows
    assert auto.result.calibration.spent == pytest.approx(auto.result.cost_usd) == pytest.approx(_ledger_cost(workdir))
