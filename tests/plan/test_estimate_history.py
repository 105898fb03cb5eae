"""Estimates that learn: a run's answers feed the next plan of the same step (per length key),
pilot answers say so, other providers' input counts are calibrated from what they reported."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from conftest import make_spec, write_csv

from batchor import api
from batchor.plan.estimate import MIN_ANSWERS, length_key
from batchor.plan.summary import plan_dict, plan_text
from batchor.state import open_state
from batchor.state.answer_stats import output_stats, run_step_report, tag_run_kind

STATE = Path(".batchor") / "state.duckdb"


def query(workdir: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(workdir / STATE), read_only=True) as db:
        return db.execute(sql).fetchall()


def new_rows(folder: Path, start: int, rows: int = 20) -> None:
    """Other input rows for the same step: nothing cached, the same length key."""
    write_csv(
        folder / "data.csv",
        [{"id": f"n{i}", "text": f"another review {i} of a product"} for i in range(start, start + rows)],
    )


def test_a_second_plan_uses_the_answers_of_the_first_run(workdir, fake):
    spec = make_spec(workdir, rows=30)
    first = api.plan(spec, save=False).header.steps[0]
    assert first.output_source == "heuristic" and first.input_source == "exact"
    api.apply(spec, handle_signals=False)
    mean = query(workdir, "SELECT avg(output_tokens), count(*) FROM attempts WHERE outcome = 'ok'")[0]
    new_rows(workdir, 0)
    step = api.plan(spec, save=False).header.steps[0]
    assert step.output_source == f"history: {mean[1]} answers"
    assert step.expected_output_tokens == round(mean[0])
    assert step.length_key == first.length_key
    assert step.counts.output_tokens_expected == round(20 * mean[0])  # the unrounded mean


def test_another_template_or_schema_has_its_own_history(workdir, fake):
    spec = make_spec(workdir, rows=MIN_ANSWERS + 2)
    answered = api.plan(spec, save=False).header.steps[0].length_key
    api.apply(spec, handle_signals=False)
    new_rows(workdir, 0)
    assert api.plan(spec, save=False).header.steps[0].output_source.startswith("history")
    for changes in ({"schema": None}, {"model": "gpt-4.1"}):
        other = make_spec(workdir, rows=MIN_ANSWERS + 2, **changes)
        step = api.plan(other, save=False).header.steps[0]
        assert step.output_source == "heuristic" and step.length_key != answered


def test_too_few_answers_keep_the_heuristic(workdir, fake):
    spec = make_spec(workdir, rows=MIN_ANSWERS - 1)
    api.apply(spec, handle_signals=False)
    new_rows(workdir, 0)
    assert api.plan(spec, save=False).header.steps[0].output_source == "heuristic"


def test_pilot_answers_are_named_as_such(workdir, fake):
    spec = make_spec(workdir, rows=15)
    result = api.apply(spec, handle_signals=False)
    store = open_state(str(workdir / STATE))
    tag_run_kind(store, result.run_id, "pilot")
    store.close()
    new_rows(workdir, 0)
    assert api.plan(spec, save=False).header.steps[0].output_source == "pilot: 15 answers"
    new_rows(workdir, 100, rows=12)
    api.apply(spec, handle_signals=False)
    new_rows(workdir, 200)
    assert api.plan(spec, save=False).header.steps[0].output_source == "pilot: 15 answers, history: 12 answers"


def test_rejected_attempts_count_in_the_expected_tokens(workdir, fake):
    """A step whose answers were re-asked bills more than one attempt per request: history says so."""
    fake.configure(malformed_times=1)
    spec = make_spec(workdir, rows=20)
    api.apply(spec, handle_signals=False)
    fake.configure(malformed_times=0)
    billed, answers = query(
        workdir,
        "SELECT sum(output_tokens), count(*) FILTER (WHERE outcome = 'ok') FROM attempts WHERE output_tokens > 0",
    )[0]
    new_rows(workdir, 0)
    step = api.plan(spec, save=False).header.steps[0]
    assert step.expected_output_tokens == round(billed / answers)
    assert step.input_factor / step.input_ratio == pytest.approx(
        2.0
    )  # each request was sent twice (input_ratio: the fake bills chars/4)


def test_other_providers_input_is_calibrated_from_reported_tokens(workdir, fake):
    spec = make_spec(workdir, rows=30, provider="anthropic", model="claude-sonnet-4-5")
    before = api.plan(spec, save=False).header.steps[0]
    assert before.input_source.startswith("estimate") and not before.token_count_exact
    api.apply(spec, handle_signals=False)
    reported, counted = query(
        workdir,
        "SELECT sum(input_tokens), sum(counted_input_tokens) FROM attempts WHERE attempt = 1 AND outcome = 'ok'",
    )[0]
    new_rows(workdir, 0)
    plan = api.plan(spec, save=False)
    step = plan.header.steps[0]
    assert step.input_source == "calibrated: 30 answers"
    assert step.input_factor == pytest.approx(reported / counted)
    assert step.token_upper_factor >= max(
        r for (r,) in query(workdir, "SELECT input_tokens * 1.0 / counted_input_tokens FROM attempts WHERE attempt = 1")
    )


def test_a_run_stores_its_estimate_and_reports_it_next_to_its_spend(workdir, fake):
    spec = make_spec(workdir, rows=12)
    plan = api.plan(spec, save=False)
    result = api.apply(spec, handle_signals=False)
    store = open_state(str(workdir / STATE))
    (row,) = run_step_report(store, result.run_id)
    stats = output_stats(store, [length_key(plan.header.steps[0])])
    store.close()
    step = plan.header.steps[0]
    assert row["step"] == "classify" and row["kind"] == "apply"
    assert row["expected_usd"] == pytest.approx(step.counts.cost_expected)
    assert row["upper_usd"] == pytest.approx(step.counts.cost_upper)
    assert row["actual_usd"] == pytest.approx(result.cost_usd)
    assert row["ratio"] == pytest.approx(result.cost_usd / step.counts.cost_expected)
    assert stats[step.length_key].by_kind["apply"].answers == 12


def test_a_mean_learned_from_few_answers_says_how_far_it_may_be_off(workdir, fake):
    """The plan gives the measured mean's 90 % error (Student's t) and flags few answers; more
    answers of the same step narrow it."""
    fake.configure(text_words=[15, 0.3])  # replies of log-normal length: a real spread
    spec = make_spec(workdir, rows=12, schema=None)
    api.apply(spec, handle_signals=False)
    new_rows(workdir, 0)
    plan = api.plan(spec, save=False)
    step = plan.header.steps[0]
    assert step.output_error is not None and step.output_error > 0.10
    assert f"(history: 12 answers, {ends_text(step)}: few answers, a pilot (--pilot N) measures more)" in plan_text(
        plan
    )
    new_rows(workdir, 100, rows=80)
    api.apply(spec, handle_signals=False)
    new_rows(workdir, 200)
    plan = api.plan(spec, save=False)
    step = plan.header.steps[0]
    assert step.output_error is not None and step.output_error < 0.10
    assert f"(history: 92 answers, {ends_text(step)});" in plan_text(plan)


def ends_text(step):
    """The mean's 90 % error as the plan prints it: its ends, the symmetric error moved by the skew."""
    below, above = step.output_error_ends
    assert below + above == pytest.approx(2 * step.output_error)  # the same width, shifted
    return f"+-{below:.0%}" if f"{below:.0%}" == f"{above:.0%}" else f"-{below:.0%} / +{above:.0%}"


def test_asking_the_same_requests_again_does_not_inflate_the_history(workdir, fake):
    """`--no-cache` runs answer the same request keys again: each run's answers are requests of
    their own, not extra attempts of the first run's requests (three runs read as 3 attempts per
    request: output and input expected 3x)."""
    spec = make_spec(workdir, rows=20)
    for _ in range(3):
        api.apply(spec, no_cache=True, handle_signals=False)
    billed, answers = query(workdir, "SELECT sum(output_tokens), count(*) FROM attempts WHERE outcome = 'ok'")[0]
    new_rows(workdir, 0)
    step = api.plan(spec, save=False).header.steps[0]
    assert step.output_source == f"history: {answers} answers" and answers == 60
    assert step.expected_output_tokens == round(billed / answers)
    assert step.input_factor / step.input_ratio == pytest.approx(1.0)


def test_re_asks_add_the_rejected_answer_and_the_feedback_to_the_expected_input(workdir, fake):
    """Half the first answers break the schema (a field left out, a word outside its enum) and are
    asked again with the rejected answer and the validator's message: the next plan expects one
    re-ask per rejected share of requests, each sending the planned input again plus what the
    fake read of the rejected answer and the feedback (its input counted as characters / 4)."""
    fake.configure(reject_share=[0.5, 0.0])
    spec = make_spec(workdir, rows=40)
    api.apply(spec, handle_signals=False)
    reasks = fake.stats()["reasks"]
    first, rejected = query(
        workdir, "SELECT count(*), count(*) FILTER (WHERE outcome = 'invalid_output') FROM attempts WHERE attempt = 1"
    )[0]
    assert 10 <= rejected <= 30 and len(reasks) == rejected  # every rejected answer re-asked once, accepted
    new_rows(workdir, 0)
    plan = api.plan(spec, save=False)
    step = plan.header.steps[0]
    assert plan_dict(plan)["steps"][0]["reask_input_tokens"] == step.reask_input_tokens  # plan --json shows it
    share = rejected / first
    assert step.input_factor / step.input_ratio == pytest.approx(1 + share)
    read = sum((len(r["rejected"]) + len(r["feedback"]) + 2) / 4 for r in reasks) / len(reasks)  # two more turns
    assert step.reask_input_tokens == pytest.approx(share * read, abs=share * 1.0)  # +-1 token of rounding
    assert step.reask_input_tokens > 10  # an answer and a message: not a rounding matter


def test_a_finished_run_is_held_to_its_whole_plan_when_a_when_step_skipped_rows(workdir, fake):
    """A `when:` on an earlier answer: the plan counts every row below it as a request to run and
    expects only its measured share to run; a run that settled every row is held to the whole
    expected cost, not to sent / planned of it (that read 2.9x for a step on a third of the rows)."""
    write_csv(workdir / "data.csv", [{"id": f"t{i}", "text": f"ticket {i}"} for i in range(30)])
    tone = {
        "type": "object",
        "additionalProperties": False,
        "required": ["tone"],
        "properties": {"tone": {"enum": ["calm", "angry", "sad"]}},
    }
    spec = make_spec(
        workdir,
        rows=30,
        steps={
            "first": {"prompt": "First {{ row.text }}", "output": {"schema": tone}},
            "second": {"prompt": "Second {{ row.text }}", "when": "first.tone == 'calm'"},
        },
    )
    result = api.apply(spec, handle_signals=False)
    second = next(s for s in result.steps if s["step"] == "second")
    sent = query(workdir, "SELECT count(DISTINCT request_key) FROM attempts WHERE step = 'second'")[0][0]
    assert 0 < sent < second["requests"] == 30 and result.status == "succeeded"
    assert second["settled_requests"] == 30
    assert second["ratio"] == pytest.approx(second["actual_usd"] / second["expected_usd"])


@pytest.mark.parametrize("factor", [0.4, 1.3])
def test_an_exact_count_the_provider_bills_otherwise_is_scaled_to_the_bill(workdir, fake, factor):
    """OpenAI's count is exact for OpenAI; a server billing `factor` x it (another accounting) is
    learned from the answers: the plan scales the input and says both figures."""
    fake.configure(token_counter="o200k", input_token_ratio={"openai": factor})
    spec = make_spec(workdir, rows=30)
    api.apply(spec, handle_signals=False)
    new_rows(workdir, 0)
    plan = api.plan(spec, save=False)
    step = plan.header.steps[0]
    assert step.token_count_exact and step.input_ratio == pytest.approx(factor, rel=0.02)
    assert step.input_source == f"counted, billed x{factor:.2f} (30 answers)"
    line = f"provider bills ~{step.counts.input_tokens:,} (x{factor:.2f} from 30 answers)"
    assert line in plan_text(plan)
    fake.reset()
    result = api.apply(spec, handle_signals=False)
    assert result.cost_usd == pytest.approx(plan.header.totals.cost_expected, rel=0.10)
    billed = fake.stats()["input_tokens"]
    assert billed == pytest.approx(step.counts.input_tokens, rel=0.03)


def test_an_exact_count_the_provider_agrees_with_stays_exact(workdir, fake):
    fake.configure(token_counter="o200k")  # the fake bills OpenAI's own chat-format count
    spec = make_spec(workdir, rows=30)
    api.apply(spec, handle_signals=False)
    new_rows(workdir, 0)
    step = api.plan(spec, save=False).header.steps[0]
    assert step.input_source == "exact" and step.input_ratio == 1.0 and step.input_factor == 1.0
