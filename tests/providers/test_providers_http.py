"""Each adapter with its real official SDK over real HTTP against the fake provider server,
driven end to end through `batchor.api.apply`."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from batchor import api
from batchor.errors import NoApiKeyError
from batchor.state import open_state
from tests.providers.helpers import provider_spec

ROOT = Path(__file__).resolve().parents[2]
REVIEWS = ROOT / "specs" / "reviews.yaml"
SECRETS = ("sk-test-secret-key-123456", "sk-ant-test-secret-123456", "gemini-test-secret-123456")

# (provider, model, extra model-block keys, fake endpoint that must answer)
TARGETS = {
    "openai-chat": ("openai", "gpt-4.1-mini", {}, "openai.chat_completions"),
    "openai-responses": ("openai", "gpt-4.1-mini", {"api": "responses"}, "openai.responses"),
    "anthropic": ("anthropic", "claude-haiku-4-5", {}, "anthropic.messages"),
    "anthropic-tool": ("anthropic", "claude-3-5-haiku-latest", {}, "anthropic.messages"),
    "gemini": ("gemini", "gemini-2.5-flash", {}, "gemini.generate_content"),
    "openai-compatible": (
        "openai-compatible",
        "my-llama",
        {"base_url": "FAKE_OPENAI", "custom": True},
        "openai.chat_completions",
    ),
    "vllm": ("vllm", "Qwen/Qwen3-8B", {"base_url": "FAKE_OPENAI"}, "openai.chat_completions"),
}


def apply(workdir: Path, spec: Path, **kwargs):
    return api.apply(
        spec, output=workdir / "out.csv", state=str(workdir / "state.duckdb"), handle_signals=False, **kwargs
    )


def read_output(workdir: Path) -> list[dict[str, str]]:
    with (workdir / "out.csv").open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def query(workdir: Path, sql: str) -> list[tuple]:
    store = open_state(str(workdir / "state.duckdb"))
    try:
        return store.execute(sql)
    finally:
        store.close()


def results(workdir: Path) -> list[tuple]:
    return query(workdir, "SELECT status, error_code, error, attempts FROM results ORDER BY request_key")


def target_spec(fake, workdir: Path, target: str, **kwargs) -> tuple[Path, str]:
    provider, model, block, endpoint = TARGETS[target]
    block = {k: fake.openai_base_url if v == "FAKE_OPENAI" else v for k, v in block.items()}
    return provider_spec(workdir, provider, model, **block, **kwargs), endpoint


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_structured_output(fake, workdir, target):
    spec, endpoint = target_spec(fake, workdir, target)
    outcome = apply(workdir, spec)
    assert outcome.status == "succeeded", outcome.stop_reason
    rows = read_output(workdir)
    assert len(rows) == 6
    for row in rows:
        assert row["_status"] == "succeeded"
        assert row["classify.sentiment"] in ("positive", "negative", "mixed")
        assert 1 <= int(row["classify.score"]) <= 5
    stats = fake.stats()
    assert stats["by_endpoint"] == {endpoint: 6}
    assert (outcome.input_tokens, outcome.output_tokens) == (stats["input_tokens"], stats["output_tokens"])


@pytest.mark.parametrize("target", ["openai-responses", "anthropic", "gemini", "openai-compatible"])
def test_text_output(fake, workdir, target):
    spec, endpoint = target_spec(fake, workdir, target, schema=None)
    outcome = apply(workdir, spec)
    assert outcome.status == "succeeded", outcome.stop_reason
    rows = read_output(workdir)
    assert [row["classify"] for row in rows] == [f"echo: Review: review number {i}" for i in range(6)]
    assert fake.stats()["by_endpoint"] == {endpoint: 6}


def test_anthropic_cost_comes_from_reported_usage(fake, workdir):
    spec, _ = target_spec(fake, workdir, "anthropic")
    outcome = apply(workdir, spec)
    stats = fake.stats()
    expected = (stats["input_tokens"] * 1.0 + stats["output_tokens"] * 5.0) / 1_000_000  # haiku 4.5 prices
    assert outcome.cost_usd == pytest.approx(expected)


# --- one example spec, three providers -------------------------------------------------------


def test_reviews_spec_with_anthropic_model_override_plans_and_applies(fake, workdir):
    plan = api.plan(REVIEWS, state=str(workdir / "state.duckdb"), model="anthropic:claude-haiku-4-5", limit=40)
    step = plan.header.steps[0]
    assert (step.provider, step.model, step.api_key_env) == ("anthropic", "claude-haiku-4-5", "ANTHROPIC_API_KEY")
    rating = step.sent_schema["properties"]["rating_guess"]  # adapted for Anthropic
    assert "maximum" not in rating and "maximum: 5" in rating["description"]
    outcome = api.apply(
        plan,
        state=str(workdir / "state.duckdb"),
        output=workdir / "out.csv",
        handle_signals=False,
        limits={"rpm": None},
    )
    assert outcome.status == "succeeded", outcome.stop_reason
    assert outcome.succeeded == step.counts.to_run > 0
    assert fake.stats()["by_endpoint"] == {"anthropic.messages": step.counts.to_run}


def test_reviews_spec_gives_the_same_columns_with_each_provider(fake, workdir):
    headers = {}
    for model in ("openai:gpt-4.1-mini", "anthropic:claude-haiku-4-5", "gemini:gemini-2.5-flash"):
        out = workdir / f"{model.split(':')[0]}.csv"
        outcome = api.apply(
            REVIEWS,
            model=model,
            state=str(workdir / "state.duckdb"),
            output=out,
            handle_signals=False,
            limits={"rpm": None},
            limit=40,
        )
        assert outcome.status == "succeeded", (model, outcome.stop_reason)
        with out.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            headers[model] = reader.fieldnames
            assert all(row["_status"] == "succeeded" for row in reader)
    assert len({tuple(h) for h in headers.values()}) == 1
    assert {"classify.sentiment", "classify.topics", "classify.rating_guess"} <= set(headers["openai:gpt-4.1-mini"])
    calls = fake.stats()["by_endpoint"]
    assert calls.keys() == {"openai.chat_completions", "anthropic.messages", "gemini.generate_content"}
    assert len(set(calls.values())) == 1  # each provider answered every distinct request once


def test_two_provider_spec_applies_against_the_fake(fake, workdir):
    spec = ROOT / "specs" / "review_replies.yaml"
    outcome = api.apply(spec, state=str(workdir / "state.duckdb"), output=workdir / "out.csv", handle_signals=False)
    assert outcome.status == "succeeded", outcome.stop_reason
    rows = read_output(workdir)
    negative = [row for row in rows if row["classify.sentiment"] == "negative"]
    assert negative and all(row["reply"].startswith("echo: A customer reviewed our") for row in negative)
    assert all(row["reply"] == "" for row in rows if row["classify.sentiment"] != "negative")
    calls = fake.stats()["by_endpoint"]
    assert calls["anthropic.messages"] <= len(negative) < calls["gemini.generate_content"]


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "env"),
    [("anthropic", "ANTHROPIC_API_KEY"), ("gemini", "GEMINI_API_KEY"), ("openai-chat", "OPENAI_API_KEY")],
)
def test_missing_key_stops_apply_before_any_request(fake, workdir, monkeypatch, target, env):
    monkeypatch.delenv(env)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    spec, _ = target_spec(fake, workdir, target)
    with pytest.raises(NoApiKeyError, match=env):
        apply(workdir, spec)
    assert fake.stats()["requests"] == 0


ERROR_TARGETS = ["openai-chat", "anthropic", "gemini"]


@pytest.mark.parametrize("target", ERROR_TARGETS)
def test_rate_limited_then_success_keeps_attempts_at_one(fake, workdir, target):
    fake.configure(error_429=0.5, retry_after_s=0.01, seed=3)
    spec, _ = target_spec(fake, workdir, target, rows=10)
    outcome = apply(workdir, spec)
    assert outcome.status == "succeeded", outcome.stop_reason
    assert fake.stats()["sent_429"] > 0
    waits = query(workdir, "SELECT count(*) FROM attempts WHERE outcome = 'rate_limited'")[0][0]
    assert waits == fake.stats()["sent_429"]
    assert {(status, attempts) for status, _, _, attempts in results(workdir)} == {("succeeded", 1)}


@pytest.mark.parametrize("target", ERROR_TARGETS)
def test_quota_exhausted_pauses_the_run(fake, workdir, target):
    fake.configure(quota_exhausted=True)
    spec, _ = target_spec(fake, workdir, target)
    outcome = apply(workdir, spec)
    assert outcome.status == "paused"
    assert not any(status == "succeeded" for status, *_ in results(workdir))


@pytest.mark.parametrize("variant", ["credit_balance", "spend_limit"])
def test_anthropic_other_quota_shapes_pause_the_run(fake, workdir, variant):
    fake.configure(quota_exhausted=variant)
    spec, _ = target_spec(fake, workdir, "anthropic")
    assert apply(workdir, spec).status == "paused"


@pytest.mark.parametrize("target", ERROR_TARGETS)
def test_invalid_request_fails_only_that_row(fake, workdir, target):
    fake.configure(fail_matching={"review number 1": 400})
    spec, _ = target_spec(fake, workdir, target)
    outcome = apply(workdir, spec)
    assert outcome.status == "partial"
    failed = [r for r in results(workdir) if r[0] == "failed"]
    assert [(code, attempts) for _, code, _, attempts in failed] == [("invalid_request", 1)]
    assert "injected fault" in failed[0][2]


def test_anthropic_overloaded_is_retried_then_fails_as_unavailable(fake, workdir):
    fake.configure(fail_matching={"review number 1": 529})
    spec, _ = target_spec(fake, workdir, "anthropic")
    apply(workdir, spec, limits={"max_attempts": 2})
    failed = [r for r in results(workdir) if r[0] == "failed"]
    assert [(code, attempts) for _, code, _, attempts in failed] == [("provider_unavailable", 2)]


@pytest.mark.parametrize("target", ERROR_TARGETS)
def test_secrets_never_reach_state_or_output(fake, workdir, target):
    fake.configure(fail_matching={"review number 1": 400, "review number 2": 401, "review number 3": "quota"})
    spec, _ = target_spec(fake, workdir, target)
    apply(workdir, spec)
    stored = json.dumps(results(workdir)) + (workdir / "out.csv").read_text(encoding="utf-8")
    stored += json.dumps(query(workdir, "SELECT error FROM attempts"))
    assert not any(secret in stored for secret in SECRETS)


MIXED_PARAMS = {
    "temperature": 0,
    "max_tokens": 50,
    "top_p": 0.9,
    "top_k": 5,
    "seed": 7,
    "stop": ["###"],
    "frequency_penalty": 0.1,
}


@pytest.mark.parametrize("target", ["openai-responses", "anthropic", "gemini", "vllm"])
def test_mixed_params_are_mapped_or_dropped_not_rejected_by_the_sdk(fake, workdir, target):
    # OpenAI's own API refuses `top_k` (plan says so: test_cli_validate_everything.py); a
    # server behind an OpenAI-compatible endpoint (vllm) takes it.
    params = {k: v for k, v in MIXED_PARAMS.items() if not (k == "top_k" and target == "openai-responses")}
    spec, _ = target_spec(fake, workdir, target, params=params)
    outcome = apply(workdir, spec)
    assert outcome.status == "succeeded", outcome.stop_reason


def test_gemini_param_the_sdk_refuses_fails_the_row_as_invalid_request(fake, workdir):
    """A name Gemini knows with a value its SDK refuses (an unknown name is refused by `plan`)."""
    spec, _ = target_spec(fake, workdir, "gemini", params={"max_tokens": 50, "candidate_count": "many"})
    apply(workdir, spec)
    assert {(code, attempts) for _, code, _, attempts in results(workdir)} == {("invalid_request", 1)}
    assert fake.stats()["requests"] == 0
