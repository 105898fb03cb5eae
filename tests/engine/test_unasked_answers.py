"""Answers no step wants, on every provider, realtime and batch: an empty text answer is
`invalid_output` (asked again with feedback) unless the step says `allow_empty: true`; an answer
that only calls a tool (OpenAI content null + `tool_calls`, Anthropic `tool_use`, Gemini
`functionCall`) fails the row `unexpected_tool_call`, naming the tool. Both are billed and
recorded with their cost, through the real SDKs against the fake."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from conftest import make_spec

from batchor import api

PROVIDERS = [("openai", "gpt-4.1-mini"), ("anthropic", "claude-haiku-4-5"), ("gemini", "gemini-2.5-flash")]
BATCH = {"mode": "batch", "batch_poll_s": 0.01, "batch_poll_max_s": 0.05}
CASES = [(*p, mode) for p in PROVIDERS for mode in ("realtime", "batch")]


def query(workdir: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(workdir / ".batchor" / "state.duckdb"), read_only=True) as db:
        return db.execute(sql).fetchall()


def text_spec(workdir: Path, provider: str, model: str, mode: str, **step: object) -> Path:
    limits = {"max_attempts": 2, **(BATCH if mode == "batch" else {})}
    steps = {"classify": {"prompt": "Review: {{ row.text }}", "output": "text", **step}}
    return make_spec(workdir, rows=3, schema=None, provider=provider, model=model, limits=limits, steps=steps)


@pytest.mark.parametrize("provider,model,mode", CASES)
def test_an_empty_answer_is_asked_again_and_fails_invalid_output(workdir, fake, provider, model, mode):
    fake.configure(fail_matching={"review number 1": "empty"})
    outcome = api.apply(text_spec(workdir, provider, model, mode), handle_signals=False)
    assert (outcome.succeeded, outcome.failed) == (2, 1)
    attempts = query(workdir, "SELECT outcome, cost_usd, input_tokens FROM attempts WHERE outcome <> 'ok'")
    assert [a[0] for a in attempts] == ["invalid_output", "invalid_output"]  # asked again, then failed
    assert all(cost > 0 and tokens > 0 for _, cost, tokens in attempts)  # billed, recorded with its cost
    ((code, error),) = query(workdir, "SELECT error_code, error FROM results WHERE status = 'failed'")
    assert code == "invalid_output" and "allow_empty" in error
    assert fake.stats()["faults"]["empty"] == 2


def test_the_re_ask_of_an_empty_answer_says_so_and_its_answer_is_kept(workdir, fake):
    fake.configure(scripted_answers=["   ", "positive"])
    spec = make_spec(workdir, rows=1, schema=None, provider="anthropic", model="claude-haiku-4-5")
    outcome = api.apply(spec, handle_signals=False)
    assert (outcome.succeeded, outcome.failed) == (1, 0)
    assert query(workdir, "SELECT output FROM results") == [("positive",)]
    assert [o for (o,) in query(workdir, "SELECT outcome FROM attempts ORDER BY attempt")] == ["invalid_output", "ok"]


@pytest.mark.parametrize("provider,model", PROVIDERS[:1])
def test_allow_empty_accepts_an_empty_answer(workdir, fake, provider, model):
    fake.configure(fail_matching={"review number 1": "empty"})
    outcome = api.apply(text_spec(workdir, provider, model, "realtime", allow_empty=True), handle_signals=False)
    assert (outcome.succeeded, outcome.failed) == (3, 0)
    assert ("",) in query(workdir, "SELECT output FROM results")


@pytest.mark.parametrize("provider,model,mode", CASES)
def test_a_tool_call_answer_fails_the_row_naming_the_tool(workdir, fake, provider, model, mode):
    fake.configure(fail_matching={"review number 2": "tool_call"})
    outcome = api.apply(text_spec(workdir, provider, model, mode), handle_signals=False)
    assert (outcome.succeeded, outcome.failed) == (2, 1)
    ((code, error, cost),) = query(workdir, "SELECT error_code, error, cost_usd FROM results WHERE status = 'failed'")
    assert code == "unexpected_tool_call" and "lookup_weather" in error and "Paris" in error
    assert cost > 0  # billed: one attempt, recorded with its cost, not asked again
    assert query(workdir, "SELECT outcome FROM attempts WHERE outcome <> 'ok'") == [("unexpected_tool_call",)]
    assert fake.stats()["faults"]["tool_call"] == 1


def test_a_tool_call_on_a_structured_step_fails_too(workdir, fake):
    fake.configure(fail_matching={"review number 0": "tool_call"})
    spec = make_spec(workdir, rows=2, provider="anthropic", model="claude-haiku-4-5")
    outcome = api.apply(spec, handle_signals=False)
    assert (outcome.succeeded, outcome.failed) == (1, 1)
    assert query(workdir, "SELECT error_code FROM results WHERE status = 'failed'") == [("unexpected_tool_call",)]
