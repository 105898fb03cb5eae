"""The fake provider server, driven by the real official SDKs over real HTTP."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import anthropic
import jsonschema
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types
from pydantic import BaseModel

from . import FakeServer, FakeServerError, prompt_key

SCHEMA = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "enum": ["positive", "negative", "neutral"]},
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "reason": {"type": "string", "minLength": 5, "maxLength": 30},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
        "flagged": {"type": ["boolean", "null"]},
    },
    "required": ["label", "score", "reason", "tags", "flagged"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def server():
    with FakeServer.start() as fake:
        yield fake


@pytest.fixture(autouse=True)
def fresh(server):
    server.reset(config=True)


@pytest.fixture
def oai(server):
    return openai.OpenAI(api_key="x", base_url=server.openai_base_url, max_retries=0)


@pytest.fixture
def claude(server):
    return anthropic.Anthropic(api_key="x", base_url=server.anthropic_base_url, max_retries=0)


@pytest.fixture
def gemini(server):
    options = genai_types.HttpOptions(base_url=server.gemini_base_url)
    return genai.Client(api_key="x", http_options=options)


def ask(client: openai.OpenAI, text: str, **kwargs):
    messages = [{"role": "user", "content": text}]
    return client.chat.completions.create(model="gpt-test", messages=messages, **kwargs)


def json_format(schema=SCHEMA):
    return {"type": "json_schema", "json_schema": {"name": "r", "schema": schema, "strict": True}}


# -- OpenAI -------------------------------------------------------------------------------------


def test_openai_chat_text_echoes_last_user_message(oai):
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "Classify this sentence please"}]},
    ]
    reply = oai.chat.completions.create(model="gpt-test", messages=messages)
    assert reply.choices[0].message.content == "echo: Classify this sentence please"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0


def test_openai_chat_json_schema_is_valid_and_deterministic(oai):
    first = ask(oai, "row 1", response_format=json_format()).choices[0].message.content
    again = ask(oai, "row 1", response_format=json_format()).choices[0].message.content
    other = ask(oai, "row 2", response_format=json_format()).choices[0].message.content
    jsonschema.validate(json.loads(first), SCHEMA)
    jsonschema.validate(json.loads(other), SCHEMA)
    assert first == again


def test_openai_responses_api(oai):
    text_format = {"format": {"type": "json_schema", "name": "r", "schema": SCHEMA, "strict": True}}
    reply = oai.responses.create(model="gpt-test", instructions="classify", input="I love it", text=text_format)
    jsonschema.validate(json.loads(reply.output_text), SCHEMA)
    assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0
    items = [{"role": "user", "content": [{"type": "input_text", "text": "plain please"}]}]
    assert oai.responses.create(model="gpt-test", input=items).output_text == "echo: plain please"


def test_openai_rpm_limit_answers_429_with_retry_after(server, oai):
    server.configure(rpm=60, burst_s=1)  # a bucket of one request, refilled every second
    ok = oai.chat.completions.with_raw_response.create(model="gpt-test", messages=[{"role": "user", "content": "a"}])
    assert ok.headers["x-ratelimit-limit-requests"] == "60"
    assert ok.headers["x-ratelimit-remaining-requests"] == "0"
    assert ok.headers["x-ratelimit-reset-requests"].endswith("s")
    with pytest.raises(openai.RateLimitError) as caught:
        ask(oai, "b")
    assert 0 < float(caught.value.response.headers["retry-after"]) <= 1.0
    assert caught.value.code == "rate_limit_exceeded"
    stats = server.stats()
    assert stats["sent_429"] == 1 and stats["rate_limited"] == 1 and stats["answered"] == 1


def test_tpm_limit_refuses_by_tokens(server, oai):
    server.configure(tpm=600, burst_s=1)  # 10 tokens a second
    ask(oai, "x" * 20)
    with pytest.raises(openai.RateLimitError) as caught:
        ask(oai, "x" * 20)
    assert caught.value.type == "tokens"


def test_openai_quota_exhausted(server, oai):
    server.configure(quota_exhausted=True)
    with pytest.raises(openai.RateLimitError) as caught:
        ask(oai, "hello")
    assert caught.value.code == "insufficient_quota"
    assert caught.value.type == "insufficient_quota"


# -- Anthropic ----------------------------------------------------------------------------------


def test_anthropic_text(claude):
    message = claude.messages.create(
        model="claude-test", max_tokens=100, system="be brief",
        messages=[{"role": "user", "content": "Summarise the row"}],
    )  # fmt: skip
    assert message.content[0].text == "echo: Summarise the row"
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0


def test_anthropic_output_config_json_schema(claude):
    message = claude.messages.create(
        model="claude-test", max_tokens=500, messages=[{"role": "user", "content": "rate it"}],
        output_config={"format": {"type": "json_schema", "schema": SCHEMA}},
    )  # fmt: skip
    jsonschema.validate(json.loads(message.content[0].text), SCHEMA)


def test_anthropic_forced_tool(claude):
    message = claude.messages.create(
        model="claude-test", max_tokens=500, messages=[{"role": "user", "content": "rate it"}],
        tools=[{"name": "record", "description": "store", "input_schema": SCHEMA}],
        tool_choice={"type": "tool", "name": "record"},
    )  # fmt: skip
    block = message.content[0]
    assert (block.type, block.name, message.stop_reason) == ("tool_use", "record", "tool_use")
    jsonschema.validate(block.input, SCHEMA)


def test_anthropic_max_tokens_cuts_structured_output(claude):
    message = claude.messages.create(
        model="claude-test", max_tokens=3, messages=[{"role": "user", "content": "rate it"}],
        output_config={"format": {"type": "json_schema", "schema": SCHEMA}},
    )  # fmt: skip
    assert message.stop_reason == "max_tokens"
    with pytest.raises(json.JSONDecodeError):
        json.loads(message.content[0].text)


def test_anthropic_rate_limit_and_quota(server, claude):
    server.configure(rpm=60, burst_s=1)
    raw = claude.messages.with_raw_response.create(
        model="claude-test", max_tokens=10, messages=[{"role": "user", "content": "a"}]
    )
    assert raw.headers["anthropic-ratelimit-requests-limit"] == "60"
    assert raw.headers["anthropic-ratelimit-requests-reset"].endswith("Z")
    with pytest.raises(anthropic.RateLimitError) as caught:
        claude.messages.create(model="claude-test", max_tokens=10, messages=[{"role": "user", "content": "b"}])
    assert float(caught.value.response.headers["retry-after"]) > 0
    assert caught.value.type == "rate_limit_error"
    server.configure(rpm=None, quota_exhausted=True)
    with pytest.raises(anthropic.PaymentRequiredError) as billing:
        claude.messages.create(model="claude-test", max_tokens=10, messages=[{"role": "user", "content": "c"}])
    assert billing.value.type == "billing_error"
    server.configure(quota_exhausted="spend_limit")
    with pytest.raises(anthropic.EnforcedSpendLimitReachedError):
        claude.messages.create(model="claude-test", max_tokens=10, messages=[{"role": "user", "content": "d"}])


# -- Gemini -------------------------------------------------------------------------------------


def test_gemini_json_schema(gemini):
    config = genai_types.GenerateContentConfig(
        system_instruction="classify",
        response_mime_type="application/json",
        response_json_schema=SCHEMA,
    )
    reply = gemini.models.generate_content(model="gemini-test", contents="great!", config=config)
    jsonschema.validate(json.loads(reply.text), SCHEMA)
    usage = reply.usage_metadata
    assert usage.total_token_count == usage.prompt_token_count + usage.candidates_token_count


class Review(BaseModel):
    label: str
    stars: int
    tags: list[str]
    note: str | None = None


def test_gemini_response_schema_on_v1beta(server):
    options = genai_types.HttpOptions(base_url=server.gemini_base_url, api_version="v1beta")
    client = genai.Client(api_key="x", http_options=options)
    config = genai_types.GenerateContentConfig(response_mime_type="application/json", response_schema=Review)
    reply = client.models.generate_content(model="gemini-test", contents="hm", config=config)
    assert isinstance(reply.parsed, Review)
    text = client.models.generate_content(model="gemini-test", contents="say hi").text
    assert text == "echo: say hi"


def test_gemini_rate_limit_and_quota(server, gemini):
    server.configure(rpm=60, burst_s=1)
    gemini.models.generate_content(model="gemini-test", contents="a")
    with pytest.raises(genai_errors.ClientError) as caught:
        gemini.models.generate_content(model="gemini-test", contents="b")
    assert (caught.value.code, caught.value.status) == (429, "RESOURCE_EXHAUSTED")
    kinds = {d["@type"].rsplit(".", 1)[1]: d for d in caught.value.details["error"]["details"]}
    assert kinds["RetryInfo"]["retryDelay"].endswith("s")
    server.configure(rpm=None, quota_exhausted=True)
    with pytest.raises(genai_errors.ClientError) as quota:
        gemini.models.generate_content(model="gemini-test", contents="c")
    assert quota.value.code == 429 and "quota" in quota.value.message


# -- Faults, stats, config ----------------------------------------------------------------------


@pytest.mark.slow  # 300 requests for a statistic
def test_fault_rates_are_roughly_honoured(server, oai):
    server.configure(seed=7, error_500=0.2, error_429=0.1, error_400=0.1)
    outcomes: dict[str, int] = {}
    for i in range(300):
        try:
            ask(oai, f"row {i}")
            kind = "ok"
        except openai.APIStatusError as exc:
            kind = type(exc).__name__
        outcomes[kind] = outcomes.get(kind, 0) + 1
    assert 35 <= outcomes["InternalServerError"] <= 85
    assert 12 <= outcomes["RateLimitError"] <= 50
    assert 12 <= outcomes["BadRequestError"] <= 50
    stats = server.stats()
    assert stats["sent_500"] == outcomes["InternalServerError"]
    assert stats["answered"] == outcomes["ok"]


def test_malformed_structured_output(server, oai):
    server.configure(malformed=1.0)
    for i in range(6):
        content = ask(oai, f"row {i}", response_format=json_format()).choices[0].message.content
        with pytest.raises((json.JSONDecodeError, jsonschema.ValidationError)):
            jsonschema.validate(json.loads(content), SCHEMA)


def test_timeout_holds_the_request(server):
    server.configure(timeout=1.0, timeout_hold_s=3)
    client = openai.OpenAI(api_key="x", base_url=server.openai_base_url, max_retries=0, timeout=0.3)
    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        ask(client, "hello")
    assert time.monotonic() - started < 2


def test_fail_matching_targets_rows(server, oai):
    server.configure(fail_matching={"BOOM": 500, "NOPE": 400})
    assert ask(oai, "fine row").choices[0].message.content == "echo: fine row"
    with pytest.raises(openai.InternalServerError):
        ask(oai, "this row goes BOOM")
    with pytest.raises(openai.BadRequestError):
        ask(oai, "NOPE")


def test_fail_matching_malformed_tool_input(server, claude):
    server.configure(fail_matching={"GARBLE": "malformed"})
    message = claude.messages.create(
        model="claude-test", max_tokens=500, messages=[{"role": "user", "content": "GARBLE"}],
        tools=[{"name": "record", "input_schema": SCHEMA}],
        tool_choice={"type": "tool", "name": "record"},
    )  # fmt: skip
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(message.content[0].input, SCHEMA)


def test_unrelated_config_change_keeps_rate_buckets(server, oai):
    server.configure(rpm=60, burst_s=1)
    ask(oai, "a")
    server.configure(latency_ms=1)
    with pytest.raises(openai.RateLimitError):
        ask(oai, "b")


def test_stats_count_duplicates_and_reset(server, oai):
    for text in ["same", "same", "same", "other"]:
        ask(oai, text)
    stats = server.stats()
    assert stats["by_prompt"][prompt_key("same")] == 3
    assert stats["by_prompt"][prompt_key("other")] == 1
    assert stats["by_endpoint"] == {"openai.chat_completions": 4}
    server.reset()
    assert server.stats()["requests"] == 0


def test_latency_is_concurrent(server):
    server.configure(latency_ms=300)
    client = openai.AsyncOpenAI(api_key="x", base_url=server.openai_base_url, max_retries=0)

    async def burst():
        messages = [{"role": "user", "content": "hi"}]
        calls = [client.chat.completions.create(model="m", messages=messages) for _ in range(40)]
        await asyncio.gather(*calls)
        await client.close()

    started = time.monotonic()
    asyncio.run(burst())
    assert time.monotonic() - started < 6  # 40 x 300 ms would be 12 s one at a time (6: a busy machine)
    assert server.stats()["max_in_flight"] >= 20


def test_config_rejects_unknown_keys(server):
    with pytest.raises(FakeServerError, match="unknown config keys"):
        server.configure(latency=5)
    assert server.config()["latency_ms"] == 0


def test_chunked_body_with_expect_continue(server):
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "chunky"}]})
    half = len(body) // 2
    chunks = "".join(f"{len(p):x}\r\n{p}\r\n" for p in (body[:half], body[half:])) + "0\r\n\r\n"
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n"
        "expect: 100-continue\r\nconnection: close\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(head.encode())
        assert sock.recv(100).startswith(b"HTTP/1.1 100 Continue")
        sock.sendall(chunks.encode())
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    status, _, payload = reply.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 200")
    assert json.loads(payload)["choices"][0]["message"]["content"] == "echo: chunky"


def test_runs_as_module(tmp_path):
    root = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-m", "tests.fakes.server", "--port", "0", "--config", "{}"]
    process = subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().startswith("LISTENING ")
    finally:
        process.terminate()
        process.wait(timeout=5)
        process.stdout.close()


def test_scripted_answers_are_served_in_order_then_generated_again(server, oai, claude):
    """A test sets canned answers (text or JSON values); each answered call takes the next one,
    whatever it asked; a fault does not use one up; setting the list again restarts it."""
    server.configure(
        scripted_answers=["first canned", {"label": "scripted"}, {"tool": "input"}], fail_matching={"boom": 500}
    )

    def ask(text: str) -> str | None:
        reply = oai.chat.completions.create(model="gpt-4.1-mini", messages=[{"role": "user", "content": text}])
        return reply.choices[0].message.content

    assert ask("anything") == "first canned"
    with pytest.raises(openai.InternalServerError):
        ask("boom")
    assert json.loads(ask("something else")) == {"label": "scripted"}
    tool = claude.messages.create(
        model="claude-haiku-4-5",
        max_tokens=200,
        messages=[{"role": "user", "content": "x"}],
        tools=[{"name": "record", "input_schema": SCHEMA}],
        tool_choice={"type": "tool", "name": "record"},
    )
    assert tool.content[0].input == {"tool": "input"}
    assert ask("after the script").startswith("echo: ")
    assert server.stats()["scripted_served"] == 3
    server.configure(scripted_answers=["again"])
    assert ask("restarted") == "again"
