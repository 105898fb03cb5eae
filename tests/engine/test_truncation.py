"""Answers cut off by the token limit (OpenAI `length`, Anthropic `max_tokens`, Gemini
`MAX_TOKENS`) are not successes: the row fails with `truncated` and its cost is recorded, or, with
`limits.on_truncation: reask`, it is asked again with a larger limit. Realtime and batch alike,
through each provider's real SDK against the fake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from batchor import api
from batchor.plan.prices import ModelPrice
from tests.engine.batch_helpers import FAST
from tests.providers.helpers import provider_spec

MODELS = {"openai": "gpt-4.1-mini", "anthropic": "claude-haiku-4-5", "gemini": "gemini-2.5-flash"}
STATE = Path(".batchor") / "state.duckdb"
# "echo: Review: review number N" is ~8 tokens at the fake: max_tokens 5 cuts it, 10 does not.
SLOW = pytest.mark.slow
# Each provider's finish reason is read by one parser for realtime and batch answers: the default
# tier keeps every provider, both modes and a structured answer once; `slow` runs the rest.
TRUNCATED = [
    ("openai", None, "realtime"),
    ("anthropic", None, "batch"),
    ("gemini", None, "realtime"),
    ("openai", "default", "batch"),
    ("gemini", "default", "batch"),
    *(
        pytest.param(*case, marks=SLOW)
        for case in [
            ("anthropic", None, "realtime"),
            ("gemini", None, "batch"),
            ("openai", None, "batch"),
            ("openai", "default", "realtime"),
            ("gemini", "default", "realtime"),
        ]
    ),
]
REASKED = [
    ("openai", "realtime"),
    ("anthropic", "batch"),
    ("gemini", "batch"),
    *(
        pytest.param(*case, marks=SLOW)
        for case in [("openai", "batch"), ("anthropic", "realtime"), ("gemini", "realtime")]
    ),
]


def truncating_spec(folder: Path, provider: str, schema: Any, mode: str, max_tokens: int, **limits: Any) -> Path:
    path = provider_spec(folder, provider, MODELS[provider], rows=4, schema=schema)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["model"]["params"]["max_tokens"] = max_tokens
    data["limits"].update(FAST if mode == "batch" else {}, max_attempts=3, **limits)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def query(sql: str) -> list[tuple]:
    with duckdb.connect(str(STATE), read_only=True) as db:
        return db.execute(sql).fetchall()


def billed(fake: Any, spec: Path, mode: str) -> float:
    step = api.plan(spec, save=False).header.steps[0]
    stats = fake.stats()
    return ModelPrice.from_dict(step.price).cost(stats["input_tokens"], stats["output_tokens"], batch=mode == "batch")


@pytest.mark.parametrize(("provider", "schema", "mode"), TRUNCATED)
def test_a_truncated_answer_fails_its_row_and_is_paid_for(fake, workdir, provider, schema, mode):
    max_tokens = 5 if schema is None else 3
    spec = truncating_spec(workdir, provider, schema, mode, max_tokens)
    result = api.apply(spec, handle_signals=False)
    assert (result.status, result.succeeded, result.failed) == ("failed", 0, 4)
    assert set(query("SELECT status, error_code, attempts FROM results")) == {("failed", "truncated", 1)}
    assert fake.stats()["answered"] == 4  # the same request would be cut the same way: not re-asked
    outcomes = query("SELECT outcome, cost_usd > 0, raw IS NOT NULL FROM attempts")
    assert outcomes == [("truncated", True, True)] * 4
    assert result.wasted_usd == pytest.approx(billed(fake, spec, mode), rel=1e-9)
    written = (workdir / "out" / "results.csv").read_text()
    assert written.count("truncated") == 4  # the output says why each row failed


@pytest.mark.parametrize(("provider", "mode"), REASKED)
def test_on_truncation_reask_asks_again_with_a_larger_limit(fake, workdir, provider, mode):
    spec = truncating_spec(workdir, provider, None, mode, 5, on_truncation="reask")
    result = api.apply(spec, handle_signals=False)
    assert (result.status, result.succeeded, result.failed) == ("succeeded", 4, 0)
    assert set(query("SELECT attempts FROM results")) == {(2,)}
    rows = query("SELECT attempt, outcome FROM attempts ORDER BY request_key, attempt")
    assert rows == [(1, "truncated"), (2, "ok")] * 4
    assert fake.stats()["answered"] == 8
    assert result.cost_usd == pytest.approx(billed(fake, spec, mode), rel=1e-9)
    assert 0 < result.wasted_usd < result.cost_usd


def test_truncation_reask_stops_at_its_ceiling(fake, workdir):
    spec = truncating_spec(workdir, "openai", None, "realtime", 2, on_truncation="reask", truncation_max_tokens=4)
    result = api.apply(spec, handle_signals=False)
    assert result.failed == 4
    # 2 -> 4 tokens, then the ceiling: no third attempt although max_attempts is 3
    assert set(query("SELECT error_code, attempts FROM results")) == {("truncated", 2)}


CEILING = [
    ("openai", "realtime"),
    ("anthropic", "realtime"),
    ("gemini", "realtime"),
    ("openai", "batch"),
    *(pytest.param(*case, marks=SLOW) for case in [("anthropic", "batch"), ("gemini", "batch")]),
]


@pytest.mark.parametrize(("provider", "mode"), CEILING)
def test_truncation_reasks_stop_at_the_steps_ceiling_within_the_plans_bound(fake, workdir, provider, mode):
    """Every answer is longer than any limit: the limit doubles from the step's 10 up to four times
    it (the ceiling comes from the step, not from the attempt), so spend stays within the plan's
    "if every request used them all" bound although max_attempts would allow 10 -> 5120."""
    from batchor.plan.summary import reask_upper

    fake.configure(text_words=[4000, 0.01])
    spec = truncating_spec(workdir, provider, None, mode, 10, on_truncation="reask")
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    data["limits"]["max_attempts"] = 10
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    bound = reask_upper(api.plan(spec, save=False).header)
    result = api.apply(spec, handle_signals=False)
    assert result.failed == 4
    assert set(query("SELECT error_code, attempts FROM results")) == {("truncated", 3)}  # 10, 20, 40
    assert max(n for (n,) in query("SELECT output_tokens FROM attempts")) <= 40
    assert result.cost_usd <= bound + 1e-12, (result.cost_usd, bound)
