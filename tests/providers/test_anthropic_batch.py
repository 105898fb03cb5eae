"""Anthropic Message Batches adapter: pure translation, and the real SDK against the fake."""

from __future__ import annotations

import json
import re

import pytest

from batchor.errors import (
    BatchCreateUnknownError,
    InvalidRequestError,
    QuotaExhaustedError,
    RateLimitedError,
    TransientProviderError,
)
from batchor.providers.anthropic.batch import encode_request, parse_line
from tests.providers.batch_cases import SCHEMA, collect, requests, round_trip, run, tag, until_ended

MODEL = "claude-haiku-4-5"


def test_requests_carry_the_realtime_params_under_a_safe_custom_id():
    [req] = requests(MODEL, 1)
    line = json.loads(encode_request(req))
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", line["custom_id"]) and line["custom_id"] == req.key
    params = line["params"]
    assert params["system"] == "Label it." and params["max_tokens"] == 40
    assert params["output_config"]["format"]["schema"] == SCHEMA


def test_result_types_map_to_completion_error_or_missing():
    ok = parse_line(
        {
            "custom_id": "k",
            "result": {
                "type": "succeeded",
                "message": {
                    "content": [{"type": "text", "text": "hi"}],
                    "usage": {"input_tokens": 2, "output_tokens": 1},
                },
            },
        }
    )
    assert ok.completion.text == "hi"

    def errored(kind: str, message: str = "x") -> object:
        return parse_line(
            {
                "custom_id": "k",
                "result": {"type": "errored", "error": {"type": "error", "error": {"type": kind, "message": message}}},
            }
        ).error

    assert isinstance(errored("invalid_request_error"), InvalidRequestError)
    assert isinstance(errored("rate_limit_error"), RateLimitedError)
    assert isinstance(errored("overloaded_error"), TransientProviderError)
    assert isinstance(errored("billing_error"), QuotaExhaustedError)
    assert parse_line({"custom_id": "k", "result": {"type": "expired"}}).missing
    assert parse_line({"custom_id": "k", "result": {"type": "canceled"}}).missing


def test_submit_poll_and_results_through_the_sdk(fake):
    fake.configure(batch_polls=2, fail_matching={"item 1": 400, "item 2": 529})
    remote, rows = run("anthropic", lambda c: round_trip(c, MODEL))
    assert remote.state == "completed" and len(rows) == 4
    assert json.loads(rows[f"{0:032x}"].completion.text)
    assert isinstance(rows[f"{1:032x}"].error, InvalidRequestError)
    assert isinstance(rows[f"{2:032x}"].error, TransientProviderError)


def test_find_reconciles_by_creation_time_and_size_skipping_claimed_batches(fake):
    async def scenario(client):
        reqs = requests(MODEL, 13)  # a size no other test's batch on the shared fake has
        wanted = tag("batchor-a", 13)
        first = await client.submit(wanted, [client.encode(r) for r in reqs])
        found = await client.find(wanted, set())
        other_size = await client.find(tag("batchor-b", 12), set())
        claimed = await client.find(tag("batchor-c", 13), {first.remote_id})
        return first, found, other_size, claimed

    first, found, other_size, claimed = run("anthropic", scenario)
    assert found.remote_id == first.remote_id
    assert other_size is None and claimed is None


def test_a_create_answered_too_late_is_unknown_then_found(fake):
    fake.configure(batch_create_delay_s=2.0)

    async def scenario(client):
        client.client = client.client.with_options(timeout=0.5)
        late = tag("batchor-late", 2)
        with pytest.raises(BatchCreateUnknownError):
            await client.submit(late, [client.encode(r) for r in requests(MODEL, 2)])
        return await client.find(late, set())

    assert run("anthropic", scenario) is not None and fake.stats()["batches_created"] == 1


def test_cancel_and_expiry_leave_missing_rows(fake):
    fake.configure(batch_polls=50, batch_done_fraction=0.5)

    async def scenario(client):
        remote = await client.submit(tag("batchor-x", 4), [client.encode(r) for r in requests(MODEL, 4)])
        await client.cancel(remote.remote_id)
        remote = await until_ended(client, remote)
        return remote, await collect(client, remote)

    remote, rows = run("anthropic", scenario)
    assert remote.state == "cancelled" and sum(r.missing for r in rows.values()) == 2
    fake.configure(batch_polls=1, batch_end="expired")
    remote, rows = run("anthropic", lambda c: round_trip(c, MODEL))
    assert remote.state == "expired" and sum(r.missing for r in rows.values()) == 2


def test_quota_on_create(fake):
    fake.configure(quota_exhausted=True)

    async def scenario(client):
        with pytest.raises(QuotaExhaustedError):
            await client.submit(tag("batchor-q", 1), [client.encode(r) for r in requests(MODEL, 1)])

    run("anthropic", scenario)
