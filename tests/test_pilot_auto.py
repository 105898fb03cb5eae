"""`--pilot auto` (batchor/pilot/auto.py): 50 rows, then the same seeded sample grown to the size
pilot/size.py computes while the whole job's interval is wider than the target, within the largest
auto pilot (8 x 50 rows), its calls and the budget. Real openai SDK against the fake, requests
counted there."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from batchor.cli.main import app
from batchor.pilot import run_auto
from batchor.state import open_state
from tests.conftest import make_spec
from tests.test_pilot import tickets
from tests.test_pilot_size import long_answers


def sent_once(workdir) -> bool:
    """No request was sent twice (every attempt its own request: none of these answers is re-asked)."""
    store = open_state(str(workdir / ".batchor" / "state.duckdb"))
    sent, distinct = store.execute("SELECT count(*), count(DISTINCT request_key) FROM attempts")[0]
    store.close()
    return bool(sent == distinct)


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_plan_pilot_auto_grows_the_sample_until_the_whole_job_is_within_10_percent(fake, workdir):
    """Widely spread answers: 50 rows leave the whole job wider than +-10 %; the same sample grows to
    the size the plan computes, paying only the new rows, and says why it stopped."""
    fake.configure(text_words=[40, 1.0])
    result = CliRunner().invoke(app, ["plan", str(long_answers(workdir, rows=1000)), "--pilot", "auto", "--yes"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert re.search(r"auto        .* up to 400 rows: at most 400 requests in all, \$[\d.]+ at most in all", out)
    grew = re.search(
        r"pilot auto: 50 rows \(50 calls, \$[\d.]+ in all\): the whole job's interval -\d+% / \+(\d+)% "
        r"is wider than \+-10%, a pilot of ~([\d,]+) rows should reach it; growing the same sample to "
        r"([\d,]+) rows",
        out,
    )
    assert grew and int(grew[1]) > 10 and int(grew[2]) == int(grew[3]) > 50, out
    stopped = re.search(r"pilot auto: 50 -> ([\d, >-]+) rows, \$[\d.]+ in all; stopped: (.+)", out)
    assert stopped, out
    final = int(stopped[1].split("->")[-1].replace(",", ""))
    assert 50 < final <= 400 and fake.stats()["requests"] == final  # each row once: the 50 were the first
    assert f"pilot calls: {final:,} of {final:,} allowed" in out and sent_once(workdir)
    assert out.index("pilot auto: 50 -> ") < out.index("Calibrated plan")
    ends = re.search(r"whole job   .*\(-(\d+)% / \+(\d+)%\)", out)
    if stopped[2].startswith("within"):  # said within: it is
        assert ends and max(int(ends[1]), int(ends[2])) <= 10


def test_a_pilot_already_within_10_percent_does_not_grow(fake, workdir):
    result = CliRunner().invoke(app, ["plan", str(make_spec(workdir, rows=300)), "--pilot", "auto", "--yes", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout.splitlines()[-1])
    assert data["auto"]["rounds"] == [50] and data["auto"]["stop"].startswith("within +-10% after 50 rows")
    assert fake.stats()["requests"] == 50 == data["pilot"]["calls"] and data["pilot"]["size"]["within"]
    bound = data["auto"]["bound"]  # the largest auto pilot: 8 x 50 rows, but the input has 300
    assert (bound["rows_most"], bound["most_calls"]) == (300, 300) and bound["cost_upper_usd"] > 0


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_an_auto_pilot_stops_at_its_largest_size(fake, workdir):
    """A target of +-5 % needs more rows than 8 x 50: the sample grows to 400 rows and stops there,
    its 400 calls the most it made."""
    fake.configure(text_words=[40, 1.0])
    spec = long_answers(workdir, rows=2000)
    result = CliRunner().invoke(app, ["plan", str(spec), "--pilot", "auto", "--pilot-target", "5", "--yes"])
    assert result.exit_code == 0, result.output
    assert "capped at the largest auto pilot (400 rows); growing the same sample to 400 rows" in result.output
    assert re.search(
        r"pilot auto: 50 -> 400 rows, .* stopped: .* is wider than \+-5%, and that is the largest "
        r"auto pilot \(400 rows; a pilot of ~[\d,]+ rows should reach it\)",
        result.output,
    )
    assert fake.stats()["requests"] == 400 and sent_once(workdir)


def test_an_auto_pilot_grows_only_within_the_budget_left(fake, workdir):
    """The budget covers the first 50 rows' bound but not the growth's: no round more is started."""
    fake.configure(text_words=[40, 1.0])
    spec = long_answers(workdir, rows=1000)
    reports: list[str] = []
    auto = run_auto(spec, max_cost=0.2, handle_signals=False, report=reports.append)
    assert auto.stop.startswith("the budget left ($0.19") and "covers no larger pilot" in auto.stop
    assert [r.rows for r in auto.rounds] == [50] and fake.stats()["requests"] == 50
    assert any("may cost more than the budget left" in line for line in reports)
    assert auto.result.cost_usd <= 0.2


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_an_auto_pilot_of_a_when_pipeline_stays_within_its_calls_and_asks_nothing_twice(fake, workdir):
    """A row-only `when:` on a tenth of the rows: every round tops its step up with rows where it
    holds; the rounds together make at most the final size x 2 calls, each request once."""
    fake.configure(text_words=[40, 1.0])
    spec = tickets(workdir, rows=1000)
    loaded = yaml.safe_load(Path(spec).read_text())
    loaded["model"]["params"]["max_tokens"] = 2000  # no answer cut by its limit (and asked again)
    Path(spec).write_text(yaml.safe_dump(loaded, sort_keys=False))
    auto = run_auto(spec, handle_signals=False)
    result = auto.result
    assert len(auto.rounds) > 1 and any(r.stratified is not None for r in auto.rounds)
    assert fake.stats()["requests"] == result.calls <= result.allowance == 2 * result.rows
    assert sent_once(workdir)
    assert result.cost_usd == pytest.approx(
        sum(r.outcome.cost_usd + sum(t.outcome.cost_usd for t in r.top_ups) for r in auto.rounds)
    )


def test_pilot_takes_a_number_or_auto(fake, workdir, batchor_cli):
    result = batchor_cli(workdir, "plan", str(make_spec(workdir)), "--pilot", "lots", "--yes")
    assert result.returncode == 64 and "--pilot 'lots': give a number of rows (1 or more) or `auto`" in result.stderr
    assert fake.stats()["requests"] == 0
    result = batchor_cli(workdir, "apply", str(make_spec(workdir)), "--pilot-target", "5", "--yes")
    assert result.returncode == 64 and "--pilot-target needs a pilot" in result.stderr
    assert fake.stats()["requests"] == 0


@pytest.mark.slow  # an auto pilot and the full run through the CLI
def test_apply_pilot_auto_runs_the_grown_pilot_then_the_rest(fake, workdir):
    fake.configure(text_words=[40, 1.0])
    spec = long_answers(workdir, rows=600)
    result = CliRunner().invoke(app, ["apply", str(spec), "--pilot", "auto", "--yes"])
    assert result.exit_code == 0, result.output
    assert result.output.index("pilot auto: 50 -> ") < result.output.index("succeeded: 600 rows")
    assert fake.stats()["requests"] == 600 and sent_once(workdir)  # the pilot's rows were not asked again
    spec_text = yaml.safe_load(spec.read_text())
    assert spec_text["output"]["path"] == "out/results.csv" and (workdir / "out" / "results.csv").exists()
