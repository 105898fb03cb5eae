"""The plan counts OpenAI input as OpenAI bills it: the chat format around each message and a
structured output's schema. The fake bills that way when it counts with o200k (its own encoder,
tests/fakes/lengths.py), so a plan's exact count must equal what the run was billed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import SENTIMENT_SCHEMA, make_spec, write_csv

from batchor import api
from batchor.plan.tokens import SCHEMA_FRAMING_TOKENS, get_counter, schema_tokens
from batchor.state import open_state

TEXTS = [
    "Great kettle, boils fast!",
    "Le café était froid — déçu.",
    "2/5: the strap broke after 3 days...",
    "ok",
    "Support answered in minutes; would buy again. 👍",
    "No.",
]


def billed_first_attempts(state: Path) -> int:
    store = open_state(str(state))
    try:
        return int(store.execute("SELECT sum(input_tokens) FROM attempts WHERE attempt = 1")[0][0])
    finally:
        store.close()


@pytest.mark.parametrize("endpoint", ["chat", "responses"])
@pytest.mark.parametrize("structured", [True, False], ids=["schema", "text"])
def test_the_planned_input_is_what_openai_bills(workdir, fake, endpoint, structured):
    fake.configure(token_counter="o200k")
    spec = make_spec(workdir, schema=SENTIMENT_SCHEMA if structured else None)
    data = yaml.safe_load(spec.read_text())
    data["model"]["api"] = endpoint
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    write_csv(workdir / "data.csv", [{"id": f"r{i}", "text": text} for i, text in enumerate(TEXTS)])
    plan = api.plan(spec, save=False)
    step = plan.header.steps[0]
    assert step.token_count_exact and step.counts.to_run == len(TEXTS)
    state = workdir / "state.duckdb"
    api.apply(plan, state=str(state), handle_signals=False)
    assert billed_first_attempts(state) == step.counts.input_tokens


def test_a_schema_is_billed_as_its_compact_json_without_the_keys_openai_leaves_out():
    counter = get_counter("openai", "gpt-4.1-mini")
    schema = {
        "type": "object",
        "additionalProperties": False,
        "required": ["label"],
        "properties": {"label": {"type": "string", "enum": ["yes", "no"]}},
    }
    billed = '{"type":"object","properties":{"label":{"type":"string","enum":["yes","no"]}}}'
    assert schema_tokens(counter, schema) == counter.count(billed) + SCHEMA_FRAMING_TOKENS
    assert schema_tokens(counter, None) == 0
