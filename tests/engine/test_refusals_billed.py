"""A refused answer is a billed 200: OpenAI's `refusal`, Anthropic's stop_reason "refusal", and
Gemini's blocked prompt (`promptFeedback.blockReason`, usageMetadata with the prompt's tokens
only: Google bills failed 400/500 requests only not, and this is neither). Each is recorded at
the cost its usage reports, realtime and batch; the row fails `content_refused`."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from conftest import make_spec

from batchor import api
from batchor.plan.prices import lookup_price

PROVIDERS = [("openai", "gpt-4.1-mini"), ("anthropic", "claude-haiku-4-5"), ("gemini", "gemini-2.5-flash")]
BATCH = {"mode": "batch", "batch_poll_s": 0.01, "batch_poll_max_s": 0.05}


def query(workdir: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(workdir / ".batchor" / "state.duckdb"), read_only=True) as db:
        return db.execute(sql).fetchall()


@pytest.mark.parametrize("provider,model,mode", [(*p, "realtime") for p in PROVIDERS] + [(*PROVIDERS[2], "batch")])
def test_a_refused_prompt_is_recorded_at_the_cost_its_usage_reports(workdir, fake, provider, model, mode):
    fake.configure(fail_matching={"review number 1": "blocked"})
    spec = make_spec(
        workdir,
        rows=3,
        provider=provider,
        model=model,
        limits={"max_attempts": 2, **(BATCH if mode == "batch" else {})},
    )
    outcome = api.apply(spec, handle_signals=False)
    assert (outcome.status, outcome.succeeded, outcome.failed) == ("partial", 2, 1)
    stats = fake.stats()
    assert stats["faults"]["blocked"] == 1  # not asked again: the same prompt is refused the same way
    ((code, estimated, cost, tokens_in, tokens_out),) = query(
        workdir, "SELECT outcome, estimated, cost_usd, input_tokens, output_tokens FROM attempts WHERE outcome <> 'ok'"
    )
    assert code == "content_refused" and not estimated and cost > 0 and tokens_in > 0
    assert tokens_out == 0 if provider == "gemini" else tokens_out > 0  # a blocked prompt generates nothing
    price = lookup_price(provider, model)
    assert price is not None
    billed = price.cost(stats["input_tokens"], stats["output_tokens"], batch=mode == "batch")
    assert outcome.cost_usd == pytest.approx(billed)
    assert query(workdir, "SELECT cost_usd FROM results WHERE status = 'failed'")[0][0] == pytest.approx(cost)
