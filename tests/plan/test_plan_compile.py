"""Planning a small spec: counts, exact tokens, cost, where the plan is saved, stable ids."""

from __future__ import annotations

import pytest
from conftest import make_spec, write_csv

from batchor import api
from batchor.plan.prices import lookup_price
from batchor.plan.tokens import REPLY_PRIMING_TOKENS, TOKENS_PER_MESSAGE, load_encoding

# What OpenAI bills for conftest's SENTIMENT_SCHEMA: its compact JSON less `required` and
# `additionalProperties`, plus 9 (plan/tokens.py SCHEMA_FRAMING_TOKENS).
BILLED_SCHEMA = (
    '{"type":"object","properties":{"sentiment":{"type":"string","enum":["positive","negative",'
    '"mixed"]},"score":{"type":"integer","minimum":1,"maximum":5}}}'
)


def independent_count(messages: list[dict[str, str]]) -> int:
    """OpenAI's chat-format count with the step's schema, from the raw o200k encoding (not
    batchor's counter)."""
    enc = load_encoding("o200k_base")
    assert enc is not None, "the bundled o200k vocabulary did not load"
    total = REPLY_PRIMING_TOKENS + len(enc.encode(BILLED_SCHEMA)) + 9
    for message in messages:
        total += TOKENS_PER_MESSAGE + len(enc.encode(message["role"])) + len(enc.encode(message["content"]))
    return total


def test_counts_tokens_and_cost_of_a_small_spec(workdir):
    spec = make_spec(workdir, rows=7)
    plan = api.plan(spec, save=False)
    totals = plan.header.totals
    assert (totals.rows, totals.to_run, totals.cached, totals.skipped) == (7, 7, 0, 0)
    expected_tokens = sum(
        independent_count(
            [
                {"role": "system", "content": "Classify."},
                {"role": "user", "content": f"Review: review number {i}"},
            ]
        )
        for i in range(7)
    )
    assert totals.input_tokens == expected_tokens
    assert totals.estimates is False
    step = plan.header.steps[0]
    assert step.token_count_exact and step.max_tokens == 50
    assert totals.output_tokens_upper == 7 * 50
    assert totals.output_tokens_expected == 7 * step.expected_output_tokens
    price = lookup_price("openai", "gpt-4.1-mini")
    assert price is not None
    assert totals.cost_upper == pytest.approx(price.cost(expected_tokens, 7 * 50))
    assert totals.cost_expected == pytest.approx(price.cost(expected_tokens, 7 * step.expected_output_tokens))
    assert 0 < totals.cost_expected < totals.cost_upper


def test_identical_requests_are_planned_once(workdir):
    spec = make_spec(workdir)
    write_csv(
        workdir / "data.csv",
        [{"id": "a", "text": "same"}, {"id": "b", "text": "same"}, {"id": "c", "text": "other"}],
    )
    totals = api.plan(spec, save=False).header.totals
    assert (totals.rows, totals.to_run) == (3, 2)


def test_when_false_rows_are_skipped(workdir):
    spec = make_spec(
        workdir,
        rows=6,
        steps={"classify": {"prompt": "Review: {{ row.text }}", "when": "row.id in ['r1', 'r4']"}},
    )
    totals = api.plan(spec, save=False).header.totals
    assert (totals.rows, totals.to_run, totals.skipped) == (6, 2, 4)


def test_plan_is_saved_under_batchor_plans(workdir):
    plan = api.plan(make_spec(workdir, rows=3))
    assert plan.saved_path == workdir / ".batchor" / "plans" / f"{plan.plan_id}.plan"  # the project's state folder
    assert (workdir / plan.saved_path).is_file()
    assert (workdir / plan.saved_path).stat().st_mode & 0o077 == 0


def test_same_spec_and_input_give_the_same_plan_id(workdir):
    spec = make_spec(workdir, rows=4)
    first = api.plan(spec)
    second = api.plan(spec)
    assert first.plan_id == second.plan_id
    assert first.saved_path == second.saved_path


def test_changed_prompt_or_input_changes_the_plan_id(workdir):
    spec = make_spec(workdir, rows=4)
    original = api.plan(spec, save=False).plan_id
    spec.write_text(spec.read_text(encoding="utf-8").replace("Classify.", "Classify briefly."), encoding="utf-8")
    reworded = api.plan(spec, save=False).plan_id
    write_csv(workdir / "data.csv", [{"id": "r0", "text": "changed"}])
    changed_input = api.plan(spec, save=False).plan_id
    assert len({original, reworded, changed_input}) == 3


def test_answered_requests_are_planned_as_cached(workdir, fake):
    spec = make_spec(workdir, rows=4)
    api.apply(spec, handle_signals=False)
    totals = api.plan(spec, save=False).header.totals
    assert (totals.to_run, totals.cached, totals.cost_upper) == (0, 4, 0)


@pytest.mark.parametrize(
    "prompt",
    [
        "Row: {{ row | tojson }}",
        "{% for name in row %}{{ name }}={{ row[name] }};{% endfor %}",
        "{% set r = row %}{{ r.text }} ({{ r.id }})",
    ],
)
def test_templates_using_the_whole_row_see_every_column(workdir, prompt):
    spec = make_spec(workdir, rows=2, steps={"classify": {"prompt": prompt}})
    plan = api.plan(spec, save=False)
    messages = [m for batch in plan.iter_batches(["__req.classify.messages"]) for m in batch.column(0).to_pylist()]
    assert "review number 1" in messages[1] and "r1" in messages[1]
    assert plan.header.totals.to_run == 2
