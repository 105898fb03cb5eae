"""OpenAI Batch adapter: pure line translation, and the real SDK against the fake files/batches API."""

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
from batchor.providers.base import CacheControl, LLMRequest
from batchor.providers.openai.batch import encode_line, parse_line
from batchor.providers.openai.realtime import to_body
from tests.fakes import prompt_key
from tests.providers.batch_cases import SCHEMA, collect, requests, round_trip, run, tag, until_ended

MODEL = "gpt-4.1-mini"


def test_lines_carry_the_realtime_body_and_the_request_key():
    [req] = requests(MODEL, 1)
    line = json.loads(encode_line(req, api="chat", strict=True))
    assert line["custom_id"] == req.key and line["method"] == "POST" and line["url"] == "/v1/chat/completions"
    assert line["body"]["response_format"]["json_schema"]["schema"] == SCHEMA
    assert line["body"]["max_completion_tokens"] == 40
    responses = json.loads(encode_line(req, api="responses"))
    assert responses["url"] == "/v1/responses" and responses["body"]["max_output_tokens"] == 40


def _line(status: int, body: dict) -> dict:
    return {"id": "r1", "custom_id": "k", "response": {"status_code": status, "body": body}, "error": None}


def test_chat_lines_spliced_into_the_step_template_are_the_bytes_of_the_whole_line():
    params, other = {"temperature": 0, "max_tokens": 50, "stop": ["\n", "é"]}, {"max_tokens": 7}
    messages = ({"role": "system", "content": 'Say "ok" \\ or ünïcode 🙂'}, {"role": "user", "content": "a\nb\u2028"})
    cases = [
        LLMRequest('k"1\\é', "gpt-4.1-mini", messages, params, SCHEMA, "classify"),
        LLMRequest("k2", "gpt-4.1-mini", messages[1:], params, SCHEMA, "classify"),
        LLMRequest("k3", "gpt-4.1-mini", messages, other, None),
        LLMRequest("k4", "gpt-4.1", messages, params, {**SCHEMA}, "other name"),
        LLMRequest("k5", "gpt-4.1", messages, params, SCHEMA, "classify", cache=CacheControl("step", 1, 0, "24h")),
        LLMRequest("k6", "gpt-4.1", messages, params, SCHEMA, "classify", cache=CacheControl("other", 1, 0)),
        LLMRequest("k7", "gpt-4.1", messages, params, SCHEMA, "classify"),  # the same step with caching off
    ]
    for strict in (True, False):
        for request in cases * 2:  # the second time from the cached template
            whole = {
                "custom_id": request.key,
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": to_body(request, api="chat", strict=strict),
            }
            expected = (json.dumps(whole, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
            assert encode_line(request, api="chat", strict=strict) == expected


def test_output_and_error_lines_are_classified_like_realtime():
    ok = parse_line(
        _line(
            200,
            {
                "choices": [{"message": {"content": "{}"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2},
            },
        )
    )
    assert ok.completion.text == "{}" and ok.completion.input_tokens == 3
    bad = parse_line(_line(400, {"error": {"message": "bad", "code": None}}))
    assert isinstance(bad.error, InvalidRequestError) and not bad.error.transient
    assert isinstance(
        parse_line(_line(429, {"error": {"message": "slow", "code": "rate_limit_exceeded"}})).error, RateLimitedError
    )
    assert isinstance(parse_line(_line(500, {"error": {"message": "oops"}})).error, TransientProviderError)
    quota = parse_line(
        _line(429, {"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}})
    )
    assert isinstance(quota.error, QuotaExhaustedError)
    expired = parse_line({"custom_id": "k", "response": None, "error": {"code": "batch_expired", "message": "x"}})
    assert expired.missing and expired.error is None


def test_submit_poll_and_results_through_the_sdk(fake):
    fake.configure(batch_polls=2, fail_matching={"item 1": 400, "item 2": 500})
    remote, rows = run("openai", lambda c: round_trip(c, MODEL))
    assert remote.state == "completed" and len(rows) == 4
    assert rows[f"{0:032x}"].completion is not None
    assert isinstance(rows[f"{1:032x}"].error, InvalidRequestError)
    assert isinstance(rows[f"{2:032x}"].error, TransientProviderError)
    assert fake.stats()["by_prompt"][prompt_key("item 0")] == 1


def test_find_reconciles_by_metadata_tag(fake):
    async def scenario(client):
        reqs = requests(MODEL, 2)
        wanted = tag("batchor-find-me", 2)
        created = await client.submit(wanted, [client.encode(r) for r in reqs])
        await client.submit(tag("batchor-other", 2), [client.encode(r) for r in reqs])
        found = await client.find(wanted, set())
        missing = await client.find(tag("batchor-never-created", 2), set())
        return created, found, missing

    created, found, missing = run("openai", scenario)
    assert found is not None and found.remote_id == created.remote_id and found.tag == "batchor-find-me"
    assert missing is None


def test_a_create_answered_too_late_is_reported_as_unknown(fake):
    fake.configure(batch_create_delay_s=2.0)

    async def scenario(client):
        client.client = client.client.with_options(timeout=0.5)
        with pytest.raises(BatchCreateUnknownError):
            await client.submit(tag("batchor-late", 1), [client.encode(r) for r in requests(MODEL, 1)])
        return await client.find(tag("batchor-late", 1), set())

    assert run("openai", scenario) is not None
    assert fake.stats()["batches_created"] == 1


def test_cancel_keeps_finished_rows_and_marks_the_rest_missing(fake):
    fake.configure(batch_polls=50, batch_done_fraction=0.5)

    async def scenario(client):
        reqs = requests(MODEL, 4)
        remote = await client.submit(tag("batchor-cancel", 4), [client.encode(r) for r in reqs])
        await client.cancel(remote.remote_id)
        remote = await until_ended(client, remote)
        return remote, await collect(client, remote)

    remote, rows = run("openai", scenario)
    assert remote.state == "cancelled"
    assert sum(1 for r in rows.values() if r.completion) == 2 and sum(r.missing for r in rows.values()) == 2


def test_failed_batch_and_quota_on_create(fake):
    fake.configure(batch_end="failed", batch_fail_code="insufficient_quota")

    async def failed(client):
        remote = await client.submit(tag("batchor-f", 1), [client.encode(r) for r in requests(MODEL, 1)])
        return await until_ended(client, remote)

    remote = run("openai", failed)
    assert remote.state == "failed" and isinstance(remote.error, QuotaExhaustedError)
    fake.configure(quota_exhausted=True)

    async def refused(client):
        with pytest.raises(QuotaExhaustedError):
            await client.submit(tag("batchor-q", 1), [client.encode(r) for r in requests(MODEL, 1)])

    run("openai", refused)


def test_a_refused_create_deletes_its_input_file(fake):
    fake.configure(quota_exhausted=True)

    async def refused(client):
        with pytest.raises(QuotaExhaustedError):
            await client.submit(tag("batchor-r", 1), [client.encode(r) for r in requests(MODEL, 1)])

    run("openai", refused)
    calls = fake.stats()["endpoint_calls"]
    assert calls["openai.files.create"] == 1 and calls["openai.files.delete"] == 1  # nothing left behind
