"""OpenAI adapter, pure parts: Chat Completions and Responses bodies, Responses parsing."""

from __future__ import annotations

import json

from batchor.providers.openai.realtime import parse_result, to_body
from tests.providers.helpers import SCHEMA, case, request


def test_chat_body_first_party_uses_max_completion_tokens():
    body = to_body(request(SCHEMA, seed=1))
    assert body["max_completion_tokens"] == 50 and "max_tokens" not in body
    assert body["messages"][0] == {"role": "system", "content": "Classify."}
    assert body["response_format"]["json_schema"] == {"name": "classify", "schema": SCHEMA, "strict": True}
    assert body["seed"] == 1


def test_chat_body_compatible_server_keeps_max_tokens_and_extra_params():
    body = to_body(request(top_k=20), first_party=False)
    assert body["max_tokens"] == 50 and body["top_k"] == 20


def test_responses_body_moves_system_to_instructions_and_drops_chat_only_params():
    body = to_body(
        request(SCHEMA, seed=1, stop=["x"], frequency_penalty=0.2, temperature=0, reasoning_effort="low"),
        api="responses",
        strict=False,
    )
    assert body["instructions"] == "Classify."
    assert body["input"] == [{"role": "user", "content": "Review: great"}]
    assert body["max_output_tokens"] == 50
    assert body["temperature"] == 0
    assert body["reasoning"] == {"effort": "low"}
    assert not {"seed", "stop", "frequency_penalty", "max_tokens", "reasoning_effort"} & body.keys()
    assert body["text"] == {"format": {"type": "json_schema", "name": "classify", "schema": SCHEMA, "strict": False}}


def test_parse_responses_answer():
    completion = parse_result(case("openai_responses.json"), api="responses")
    assert json.loads(completion.text) == {"sentiment": "mixed", "score": 3}
    assert (completion.input_tokens, completion.output_tokens, completion.cached_input_tokens) == (80, 9, 16)
    assert completion.finish_reason == "completed"
