"""Gemini batch jobs adapter: pure translation, and google-genai against the fake batch jobs API,
inline and through an uploaded JSONL file (`batch_inline_max_bytes` set low)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from batchor.errors import (
    BatchCreateUnknownError,
    InvalidRequestError,
    QuotaExhaustedError,
    RateLimitedError,
    TransientProviderError,
)
from batchor.providers.base import CacheControl, LLMRequest
from batchor.providers.gemini.batch import encode_request, file_line, parse_row
from tests.providers.batch_cases import SCHEMA, collect, requests, round_trip, run, tag, until_ended

MODEL = "gemini-2.5-flash"
FILE_MODE = {"batch_inline_max_bytes": 100}  # any chunk is larger: it goes as a file


def test_inline_requests_carry_the_realtime_arguments_and_the_key():
    [req] = requests(MODEL, 1)
    line = json.loads(encode_request(req))
    assert line["metadata"] == {"key": req.key} and line["model"] == MODEL
    assert line["config"]["response_json_schema"] == SCHEMA and line["config"]["max_output_tokens"] == 40
    assert line["config"]["system_instruction"] == "Label it."


def test_file_lines_are_rest_requests_keyed_by_the_request_key():
    schema = {"type": "object", "properties": {"snake_name": {"type": "string"}}, "required": ["snake_name"]}
    req = LLMRequest(
        "k1",
        MODEL,
        ({"role": "system", "content": "Label it."}, {"role": "user", "content": "hi"}),
        {
            "max_tokens": 40,
            "temperature": 0,
            "stop": "END",
            "thinking_config": {"thinking_budget": 0},
            "safety_settings": [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}],
        },
        schema,
        "label",
    )
    raw = file_line(encode_request(req))
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    line = json.loads(raw)
    assert line["key"] == "k1" and set(line) == {"key", "request"}
    request = line["request"]
    assert request["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]
    assert request["systemInstruction"] == {"parts": [{"text": "Label it."}]}
    assert request["safetySettings"] == [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}]
    assert request["generationConfig"] == {
        "maxOutputTokens": 40,
        "temperature": 0.0,
        "stopSequences": ["END"],
        "thinkingConfig": {"thinkingBudget": 0},
        "responseMimeType": "application/json",
        "responseJsonSchema": schema,
    }  # the schema as written


def test_file_line_rejects_a_config_the_sdk_does_not_know():
    [req] = requests(MODEL, 1)
    bad = LLMRequest(req.key, MODEL, req.messages, {"max_tokens": 5, "bogus_param": 1}, None, "label")
    with pytest.raises(ValueError, match="bogus_param"):
        file_line(encode_request(bad))


def test_inline_and_file_results_map_to_completion_or_error():
    ok = parse_row(
        {
            "metadata": {"key": "k"},
            "response": {
                "candidates": [{"content": {"parts": [{"text": "hi"}]}, "finish_reason": "STOP"}],
                "usage_metadata": {"prompt_token_count": 4, "candidates_token_count": 1},
            },
        }
    )
    assert ok.completion.text == "hi" and ok.completion.input_tokens == 4
    rest = parse_row(
        {
            "key": "k2",
            "response": {
                "candidates": [{"content": {"parts": [{"text": "yo"}], "role": "model"}, "finishReason": "STOP"}],
                "usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 2, "thoughtsTokenCount": 3},
                "modelVersion": MODEL,
            },
        }
    )
    assert (rest.key, rest.completion.text, rest.completion.input_tokens, rest.completion.output_tokens) == (
        "k2",
        "yo",
        7,
        5,
    )

    def error(code: int, status: str, message: str = "x", where: str = "metadata") -> object:
        body = {"code": code, "status": status, "message": message}
        row = {"metadata": {"key": "k"}, "error": body} if where == "metadata" else {"key": "k", "error": body}
        return parse_row(row).error

    assert isinstance(error(400, "INVALID_ARGUMENT"), InvalidRequestError)
    assert isinstance(error(400, "INVALID_ARGUMENT", where="file"), InvalidRequestError)
    assert isinstance(error(429, "RESOURCE_EXHAUSTED", "slow down"), (RateLimitedError, QuotaExhaustedError))
    assert isinstance(error(500, "INTERNAL", where="file"), TransientProviderError)
    assert parse_row({"response": {}}) is None


@pytest.mark.parametrize("options", [{}, FILE_MODE], ids=["inline", "file"])
def test_submit_poll_and_results_through_the_sdk(fake, options):
    # A 429 row carries RetryInfo objects in `details`, which the SDK types as strings (inline):
    # the job is then read leniently, and the row is still a rate limit, not a quota.
    failing = {"item 1": 400, "item 2": 500, "item 3": 429}
    fake.configure(batch_polls=2, fail_matching=failing)
    remote, rows = run("gemini", lambda c: round_trip(c, MODEL), **options)
    assert remote.state == "completed" and len(rows) == 4
    assert bool(remote.handle.file_name) == bool(options)  # results from a file only in file mode
    assert json.loads(rows[f"{0:032x}"].completion.text)
    assert isinstance(rows[f"{1:032x}"].error, InvalidRequestError)
    assert isinstance(rows[f"{2:032x}"].error, TransientProviderError)
    assert isinstance(rows[f"{3:032x}"].error, RateLimitedError)
    assert fake.stats()["batches_created"] == 1 and set(fake.stats()["batch_rows_by_id"].values()) == {1}


def test_a_file_job_uploads_under_the_batch_id_and_names_its_files_for_deletion(fake):
    async def scenario(client):
        reqs = requests(MODEL, 3)
        remote = await client.submit(tag("batchor-gem-file", 3), [client.encode(r) for r in reqs])
        uploaded = await client.client.aio.files.get(name="files/batchor-gem-file")
        remote = await until_ended(client, remote)
        rows = await collect(client, remote)
        assert remote.files == ("files/batchor-gem-file", remote.handle.file_name)
        for name in remote.files:  # the engine deletes them once the rows are stored
            await client.delete_file(name)
            with pytest.raises(Exception, match="not found"):
                await client.client.aio.files.get(name=name)
        return uploaded, rows

    uploaded, rows = run("gemini", scenario, **FILE_MODE)
    assert uploaded.display_name == "batchor-gem-file" and uploaded.size_bytes > 100
    assert len(rows) == 3 and all(r.completion is not None and r.raw for r in rows.values())


def test_an_invalid_config_in_file_mode_is_refused_before_any_upload(fake):
    async def scenario(client):
        bad = LLMRequest("k", MODEL, ({"role": "user", "content": "x"},), {"bogus_param": 1}, None, "s")
        with pytest.raises(InvalidRequestError, match="bogus_param"):
            await client.submit(tag("batchor-gem-bad", 1), [client.encode(bad)] * 3)

    run("gemini", scenario, **FILE_MODE)
    assert fake.stats()["batches_created"] == 0


def test_find_reconciles_by_display_name(fake):
    async def scenario(client):
        wanted = tag("batchor-gem-find", 2)
        created = await client.submit(wanted, [client.encode(r) for r in requests(MODEL, 2)])
        return created, await client.find(wanted, set()), await client.find(tag("batchor-gem-none", 2), set())

    created, found, missing = run("gemini", scenario)
    assert found.remote_id == created.remote_id and found.tag == "batchor-gem-find" and missing is None


def test_a_job_whose_row_errors_carry_detail_objects_is_still_found_and_read(fake):
    fake.configure(fail_matching={"item 1": 429})  # the row error carries a RetryInfo object

    async def scenario(client):
        wanted = tag("batchor-gem-details", 2)
        created = await client.submit(wanted, [client.encode(r) for r in requests(MODEL, 2)])
        ended = await until_ended(client, created)
        return created, await client.find(wanted, set()), await collect(client, ended)

    created, found, rows = run("gemini", scenario)
    assert found is not None and found.remote_id == created.remote_id
    assert isinstance(rows[f"{1:032x}"].error, RateLimitedError) and rows[f"{1:032x}"].error.retry_after
    assert rows[f"{0:032x}"].completion is not None


def test_a_create_answered_too_late_is_unknown_then_found(fake):
    fake.configure(batch_create_delay_s=3.0)

    async def scenario(client):
        from google import genai

        client.client = genai.Client(
            api_key="x",
            http_options={"base_url": fake.gemini_base_url, "timeout": 500, "retry_options": {"attempts": 1}},
        )
        late = tag("batchor-gem-late", 1)
        with pytest.raises(BatchCreateUnknownError):
            await client.submit(late, [client.encode(r) for r in requests(MODEL, 1)])
        return await client.find(late, set())

    assert run("gemini", scenario) is not None and fake.stats()["batches_created"] == 1


@pytest.mark.parametrize("options", [{}, FILE_MODE], ids=["inline", "file"])
def test_cancel_and_expiry_keep_only_rows_that_ran(fake, options):
    fake.configure(batch_polls=50, batch_done_fraction=0.5)

    async def scenario(client):
        remote = await client.submit(tag("batchor-gx", 4), [client.encode(r) for r in requests(MODEL, 4)])
        await client.cancel(remote.remote_id)
        remote = await until_ended(client, remote)
        return remote, await collect(client, remote)

    remote, rows = run("gemini", scenario, **options)
    assert remote.state == "cancelled" and len(rows) == 2
    fake.configure(batch_polls=1, batch_end="expired")
    remote, rows = run("gemini", lambda c: round_trip(c, MODEL), **options)
    assert remote.state == "expired" and len(rows) == 2


def test_quota_on_create(fake):
    fake.configure(quota_exhausted=True)

    async def scenario(client):
        with pytest.raises(QuotaExhaustedError):
            await client.submit(tag("batchor-gq", 1), [client.encode(r) for r in requests(MODEL, 1)])

    run("gemini", scenario)


@pytest.mark.parametrize("options", [{}, FILE_MODE], ids=["inline", "file"])
def test_a_step_cache_made_before_a_lost_create_is_found_by_its_name_then_released(fake, options):
    """The explicit cache of a batch step (batch_cache.py): a create whose answer is lost leaves the
    cache made; the next process's submit finds it by its display name instead of paying again,
    every line reads it, and releasing it deletes it."""
    system = "You label reviews. " + " ".join(f"Rule {i}: read closely." for i in range(300))
    reqs = [
        replace(
            r,
            messages=({"role": "system", "content": system}, r.messages[1]),
            cache=CacheControl("k" * 32, 1, 0, explicit=True),
        )
        for r in requests(MODEL, 2)
    ]
    fake.configure(fault_plan={"gemini.batches.create": ["503"]})

    async def lost(client):
        with pytest.raises(BatchCreateUnknownError):
            await client.submit(tag("batchor-gem-cache", 2), [client.encode(r) for r in reqs])

    async def again(client):
        remote = await until_ended(
            client, await client.submit(tag("batchor-gem-cache2", 2), [client.encode(r) for r in reqs])
        )
        rows = await collect(client, remote)
        await client.release_caches("job1", "k" * 32)
        return rows

    run("gemini", lost, **options)
    rows = run("gemini", again, **options)  # another client: what a restarted apply builds
    caches = fake.stats()["context_caches"]
    assert caches["created"] == 1 and caches["deleted"] == 1
    assert all(r.completion is not None and r.completion.cached_input_tokens > 1024 for r in rows.values())
