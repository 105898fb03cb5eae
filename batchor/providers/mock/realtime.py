"""The offline rehearsal provider: instant, deterministic, free answers valid against the schema.

It exercises the whole engine and state without a network or a key; answers depend only on the
request key, so re-runs are reproducible.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from batchor.providers.base import Completion, Embeddings, EmbedRequest, LLMRequest, ProviderConfig, ToolCall
from batchor.providers.embeddings import mock_vector
from batchor.schema.sample_values import sample_value

MOCK_SIZE = 256  # vector length for a model whose size the plan does not know


def to_body(request: LLMRequest) -> dict[str, Any]:
    body = {"model": request.model, "messages": list(request.messages), "schema": request.schema}
    if request.tools:
        body.update(tools=[vars(t) for t in request.tools], tool_choice=request.tool_choice)
    return body


def answer(request: LLMRequest) -> Completion:
    """The deterministic answer for a request (pure: a function of the request only)."""
    if request.tools:
        return _called(request)
    if request.schema is not None:
        text = json.dumps(sample_value(request.schema, request.key), ensure_ascii=False)
    else:
        user = request.messages[-1]["content"]
        text = f"mock answer to: {user[:60]}"
    prompt_chars = sum(len(m["content"]) for m in request.messages)
    return Completion(
        text=text,
        input_tokens=prompt_chars // 4 + 1,
        output_tokens=len(text) // 4 + 1,
        finish_reason="stop",
        model=request.model,
    )


def _called(request: LLMRequest) -> Completion:
    """A call of the tool `tool_choice` names, else of one chosen by the request key, with sample
    arguments valid against its parameters."""
    named = [t for t in request.tools if t.name == request.tool_choice]
    tool = named[0] if named else request.tools[zlib.crc32(request.key.encode()) % len(request.tools)]
    arguments = sample_value(tool.parameters, request.key)
    text = json.dumps(arguments, ensure_ascii=False)
    prompt_chars = sum(len(m["content"]) for m in request.messages)
    return Completion(
        text="",
        tool_calls=(ToolCall(tool.name, arguments),),
        input_tokens=prompt_chars // 4 + 1,
        output_tokens=len(text) // 4 + 1,
        finish_reason="tool_calls",
        model=request.model,
    )


class MockProvider:
    name = "mock"

    async def complete(self, request: LLMRequest) -> Completion:
        return answer(request)

    async def embed(self, request: EmbedRequest) -> Embeddings:
        """Deterministic unit vectors from each text's hash, of the planned size; tokens ~ chars/4."""
        size = request.dimensions or request.size or MOCK_SIZE
        return Embeddings(
            vectors=[mock_vector(text, size) for text in request.texts],
            input_tokens=sum(len(text) // 4 + 1 for text in request.texts),
            model=request.model,
        )

    async def aclose(self) -> None:
        return None


def create(config: ProviderConfig, info: Any) -> MockProvider:
    return MockProvider()
