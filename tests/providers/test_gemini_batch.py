"""Gemini batch jobs adapter: pure translation, and google-genai against the fake batch jobs API."""

from __future__ import annotations

import json

import pytest

from batchor.errors import (
    BatchCreateUnknownError,
    InvalidRequestError,
    QuotaExhaustedError,
    RateLimitedError,
    TransientProviderError,
)
from batchor.providers.gemini_batch import encode_request, parse_inlined
from tests.providers.batch_cases import SCHEMA, collect, requests, round_trip, run, tag, until_ended

MODEL = "gemini-2.5-flash"


def test_inline_requests_carry_the_realtime_arguments_and_the_key():
    [req] = requests(MODEL, 1)
    line = json.loads(encode_request(req))
    assert line["metadata"] == {"key": req.key} and line["model"] == MODEL
    assert line["config"]["response_json_schema"] == SCHEMA and line["config"]["max_output_tokens"] == 40
    assert line["config"]["system_instruction"] == "Label it."


def test_inlined_responses_map_to_completion_or_error():
    ok = parse_inlined({"metadata": {"key": "k"}, "response": {
        "candidates": [{"content": {"parts": [{"text": "hi"}]}, "finish_reason": "STOP"}],
        "usage_metadata": {"prompt_token_count": 4, "candidates_token_count": 1}}})
    assert ok.completion.text == "hi" and ok.completion.input_tokens == 4

    def error(code: int, status: str, message: str = "x") -> object:
        return parse_inlined({"metadata": {"key": "k"}, "error": {"code": code, "status": status,
                                                                  "message": message}}).error

    assert isinstance(error(400, "INVALID_ARGUMENT"), InvalidRequestError)
    assert isinstance(error(429, "RESOURCE_EXHAUSTED", "slow down"), (RateLimitedError, QuotaExhaustedError))
    assert isinstance(error(500, "INTERNAL"), TransientProviderError)
    assert parse_inlined({"response": {}}) is None


def test_submit_poll_and_results_through_the_sdk(fake):
    fake.configure(batch_polls=2, fail_matching={"item 1": 400, "item 2": 500})
    remote, rows = run("gemini", lambda c: round_trip(c, MODEL))
    assert remote.state == "completed" and len(rows) == 4
    assert json.loads(rows[f"{0:032x}"].completion.text)
    assert isinstance(rows[f"{1:032x}"].error, InvalidRequestError)
    assert isinstance(rows[f"{2:032x}"].error, TransientProviderError)


def test_find_reconciles_by_display_name(fake):
    async def scenario(client):
        wanted = tag("batchor-gem-find", 2)
        created = await client.submit(wanted, [client.encode(r) for r in requests(MODEL, 2)])
        return created, await client.find(wanted, set()), await client.find(tag("batchor-gem-none", 2), set())

    created, found, missing = run("gemini", scenario)
    assert found.remote_id == created.remote_id and found.tag == "batchor-gem-find" and missing is None


def test_a_create_answered_too_late_is_unknown_then_found(fake):
    fake.configure(batch_create_delay_s=3.0)

    async def scenario(client):
        from google import genai

        client.client = genai.Client(api_key="x", http_options={
            "base_url": fake.gemini_base_url, "timeout": 500, "retry_options": {"attempts": 1}})
        late = tag("batchor-gem-late", 1)
        with pytest.raises(BatchCreateUnknownError):
            await client.submit(late, [client.encode(r) for r in requests(MODEL, 1)])
        return await client.find(late, set())

    assert run("gemini", scenario) is not None and fake.stats()["batches_created"] == 1


def test_cancel_and_expiry_keep_only_rows_that_ran(fake):
    fake.configure(batch_polls=50, batch_done_fraction=0.5)

    async def scenario(client):
        remote = await client.submit(tag("batchor-gx", 4), [client.encode(r) for r in requests(MODEL, 4)])
        await client.cancel(remote.remote_id)
        remote = await until_ended(client, remote)
        return remote, await collect(client, remote)

    remote, rows = run("gemini", scenario)
    assert remote.state == "cancelled" and len(rows) == 2
    fake.configure(batch_polls=1, batch_end="expired")
    remote, rows = run("gemini", lambda c: round_trip(c, MODEL))
    assert remote.state == "expired" and len(rows) == 2


def test_quota_on_create(fake):
    fake.configure(quota_exhausted=True)

    async def scenario(client):
        with pytest.raises(QuotaExhaustedError):
            await client.submit(tag("batchor-gq", 1), [client.encode(r) for r in requests(MODEL, 1)])

    run("gemini", scenario)
