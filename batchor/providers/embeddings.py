"""Embedding requests and answers on the wire, as pure functions (tested on JSON).

OpenAI `/v1/embeddings` (and OpenAI-compatible servers: vLLM, Ollama) takes a list of up to 2,048
texts and answers one `{"index", "embedding"}` per text with the call's `usage.prompt_tokens`;
its Batch API takes the same body per line. Gemini's `batchEmbedContents` (what google-genai's
`embed_content` posts for a list) answers `embeddings[].values` in request order, without usage.
A vector is stored as compact JSON text with 9 significant digits: exact for float32 values.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from batchor.errors import TransientProviderError
from batchor.providers.base import Completion, Embeddings, EmbedRequest, LLMRequest


def vector_json(values: Sequence[float]) -> str:
    """A vector as stored: compact JSON, float32 precision (9 significant digits round-trip it)."""
    return "[" + ",".join(format(float(v), ".9g") for v in values) + "]"


def embed_request(request: LLMRequest) -> EmbedRequest:
    """An embedding step's planned request (one text: its user message) as an `EmbedRequest`."""
    return EmbedRequest(request.model, (str(request.messages[-1]["content"]),), request.params.get("dimensions"))


def openai_body(request: EmbedRequest, *, single: bool = False) -> dict[str, Any]:
    """The JSON body of /v1/embeddings (`single`: one text as a string, as a batch line has it)."""
    body: dict[str, Any] = {
        "model": request.model,
        "input": request.texts[0] if single else list(request.texts),
        "encoding_format": "float",
    }
    if request.dimensions is not None:
        body["dimensions"] = request.dimensions
    return body


def parse_openai(data: dict[str, Any], count: int) -> Embeddings:
    """Vectors by `index` (a text the answer lacks gets None), and the call's input tokens."""
    items = data.get("data")
    if not isinstance(items, list):
        raise TransientProviderError("embeddings answer has no `data` list")
    vectors: list[list[float] | None] = [None] * count
    for position, item in enumerate(items):
        index = item.get("index", position) if isinstance(item, dict) else None
        vector = item.get("embedding") if isinstance(item, dict) else None
        if isinstance(index, int) and 0 <= index < count and isinstance(vector, list):
            vectors[index] = vector
    usage = data.get("usage") or {}
    return Embeddings(
        vectors=vectors,
        input_tokens=int(usage.get("prompt_tokens") or 0),
        usage_known=bool(usage),
        model=data.get("model"),
    )


def openai_completion(data: dict[str, Any]) -> Completion:
    """A batch line's answer (one text) as a Completion whose text is the vector."""
    answer = parse_openai(data, 1)
    if answer.vectors[0] is None:
        raise TransientProviderError("embeddings answer has no vector")
    return Completion(
        text=vector_json(answer.vectors[0]),
        input_tokens=answer.input_tokens,
        output_tokens=0,
        finish_reason="stop",
        model=answer.model,
        usage_known=answer.usage_known,
        raw={"model": data.get("model"), "usage": data.get("usage")},
    )


def gemini_arguments(request: EmbedRequest) -> dict[str, Any]:
    """Keyword arguments of google-genai's `client.aio.models.embed_content`."""
    config: dict[str, Any] = {}
    if request.dimensions is not None:
        config["output_dimensionality"] = request.dimensions
    return {"model": request.model, "contents": list(request.texts), "config": config or None}


def parse_gemini(embeddings: Sequence[Any] | None, count: int, usage_tokens: int | None) -> Embeddings:
    """Vectors in request order (`values` of each embedding); usage only when the API sent it."""
    vectors: list[list[float] | None] = [None] * count
    for index, embedding in enumerate(list(embeddings or [])[:count]):
        values = getattr(embedding, "values", None)
        vectors[index] = list(values) if values else None
    return Embeddings(vectors=vectors, input_tokens=usage_tokens or 0, usage_known=usage_tokens is not None)


def gemini_completion(response: dict[str, Any]) -> Completion:
    """A Gemini embeddings job's result line (`{"embedding": {"values"}}`): no usage is sent, so the
    cost is the plan's count (marked estimated)."""
    values = (response.get("embedding") or {}).get("values")
    if not values:
        raise TransientProviderError("embeddings result has no vector")
    return Completion(
        text=vector_json(values), output_tokens=0, finish_reason="stop", usage_known=False, raw={"values": len(values)}
    )


def mock_vector(text: str, size: int) -> list[float]:
    """A deterministic unit vector from the text's hash: the same text, the same vector."""
    import hashlib
    import math
    import random

    rng = random.Random(hashlib.sha256(text.encode("utf-8")).digest())
    values = [rng.gauss(0.0, 1.0) for _ in range(size)]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


def loads_vector(text: str) -> list[float]:
    """A stored vector back as floats."""
    values = json.loads(text)
    return [float(v) for v in values]
