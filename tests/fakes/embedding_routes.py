"""Embedding endpoints of the fake: OpenAI ``POST /v1/embeddings`` (also a Batch API line's url)
and Gemini ``models/{model}:batchEmbedContents`` (what google-genai's ``embed_content`` posts).

Strict like the real APIs: OpenAI takes a string or up to 2,048 non-empty strings, at most 8,192
tokens each and 300,000 in all, ``dimensions`` only for text-embedding-3 models and never above
the model's size, ``encoding_format`` float or base64; Gemini takes 1..100 requests, each naming
the URL's model, with text parts and an optional ``outputDimensionality``. Anything else is the
provider's 400. A call goes the way every model call goes (core.Fake: faults, ``fail_matching``
on any of its texts, rate limits, latency); vectors are deterministic unit vectors of each text's
hash, and every embedded text is counted in ``stats["embedded"]`` (``stats["embed_calls"]``
lists the texts per call).
"""

from __future__ import annotations

import base64
import hashlib
import math
import random
import struct
from typing import Any

from .core import Answer, Call
from .lengths import count_tokens

OPENAI_SIZES = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}
GEMINI_SIZES = {"gemini-embedding-001": 3072}
SERVER_SIZE = 32  # any other model (a vLLM or Ollama server's)
OPENAI_MAX_INPUTS, OPENAI_MAX_TOKENS, OPENAI_MAX_TEXT_TOKENS = 2048, 300_000, 8192
GEMINI_MAX_REQUESTS = 100
_OPENAI_KEYS = {"model", "input", "encoding_format", "dimensions", "user"}


def vector(text: str, size: int) -> list[float]:
    rng = random.Random(hashlib.sha256(text.encode("utf-8")).digest())
    values = [rng.gauss(0.0, 1.0) for _ in range(size)]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


def _call(provider: str, model: str, texts: list[str], body: dict[str, Any], size: int) -> Call:
    joined = "\n".join(texts)  # fail_matching and rate limits see every text of the call
    return Call(
        provider=provider,
        model=model,
        prompt=joined,
        input_text=joined,
        body={**body, "_size": size},
        inputs=tuple(texts),
    )


def parse_openai(body: dict[str, Any], params: dict[str, str]) -> Call:
    unknown = sorted(set(body) - _OPENAI_KEYS)
    if unknown:
        raise ValueError(f"Unrecognized request argument supplied: {unknown[0]}")
    model, raw = str(body["model"]), body["input"]
    texts = [raw] if isinstance(raw, str) else raw
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) and t for t in texts):
        raise ValueError("'$.input' is invalid: a non-empty string or an array of non-empty strings")
    if len(texts) > OPENAI_MAX_INPUTS:
        raise ValueError(f"'$.input' is too long: at most {OPENAI_MAX_INPUTS} inputs per request")
    counts = [count_tokens(t, "chars/4") for t in texts]
    if max(counts) > OPENAI_MAX_TEXT_TOKENS:
        raise ValueError(
            f"This model's maximum context length is {OPENAI_MAX_TEXT_TOKENS} tokens, however you "
            f"requested {max(counts)} tokens in your input"
        )
    if sum(counts) > OPENAI_MAX_TOKENS:
        raise ValueError(f"Requested {sum(counts)} tokens, max {OPENAI_MAX_TOKENS} tokens per request")
    if body.get("encoding_format", "float") not in ("float", "base64"):
        raise ValueError("encoding_format must be 'float' or 'base64'")
    return _call("openai", model, texts, body, _openai_size(model, body.get("dimensions")))


def _openai_size(model: str, dimensions: Any) -> int:
    full = OPENAI_SIZES.get(model, SERVER_SIZE)
    if dimensions is None:
        return full
    if not model.startswith("text-embedding-3") and model in OPENAI_SIZES:
        raise ValueError("This model does not support specifying dimensions.")
    if not isinstance(dimensions, int) or isinstance(dimensions, bool) or not 1 <= dimensions <= full:
        raise ValueError(f"dimensions must be an integer between 1 and {full}")
    return dimensions


def render_openai(call: Call, answer: Answer, uid: str) -> dict[str, Any]:
    size, as_base64 = call.body["_size"], call.body.get("encoding_format") == "base64"
    data = []
    for index, text in enumerate(call.inputs):
        values = vector(text, size)
        encoded: Any = base64.b64encode(struct.pack(f"<{size}f", *values)).decode() if as_base64 else values
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    data.reverse()  # the API keys vectors by `index`; clients must not rely on the order
    tokens = sum(count_tokens(t, "chars/4") for t in call.inputs)
    return {
        "object": "list",
        "data": data,
        "model": call.model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def parse_gemini(body: dict[str, Any], params: dict[str, str]) -> Call:
    requests = body["requests"]
    if not isinstance(requests, list) or not requests:
        raise ValueError("* BatchEmbedContentsRequest.requests: requests is not specified")
    if len(requests) > GEMINI_MAX_REQUESTS:
        raise ValueError(
            f"* BatchEmbedContentsRequest.requests: at most {GEMINI_MAX_REQUESTS} requests can be in one batch"
        )
    model, texts, sizes = params["model"], [], set()
    for i, request in enumerate(requests):
        if request.get("model") != f"models/{model}":
            raise ValueError(
                f"* BatchEmbedContentsRequest.requests[{i}].model: model must be models/{model}, "
                f"as in the URL (got {request.get('model')!r})"
            )
        parts = (request.get("content") or {}).get("parts")
        text = "".join(p.get("text", "") for p in parts or [] if isinstance(p, dict))
        if not parts or not text:
            raise ValueError(f"* BatchEmbedContentsRequest.requests[{i}].content: text parts are required")
        texts.append(text)
        config = request.get("embedContentConfig") or request
        sizes.add(_gemini_size(model, config.get("outputDimensionality")))
    if len(sizes) != 1:
        raise ValueError("* BatchEmbedContentsRequest: every request must ask for the same outputDimensionality")
    return _call("gemini", model, texts, body, sizes.pop())


def _gemini_size(model: str, dimensions: Any) -> int:
    full = GEMINI_SIZES.get(model, SERVER_SIZE)
    if dimensions is None:
        return full
    if not isinstance(dimensions, int) or not 1 <= dimensions <= full:
        raise ValueError(f"* outputDimensionality must be between 1 and {full}")
    return dimensions


def render_gemini(call: Call, answer: Answer, uid: str) -> dict[str, Any]:
    size = call.body["_size"]
    return {"embeddings": [{"values": vector(text, size)} for text in call.inputs]}


def parse_gemini_one(body: dict[str, Any], params: dict[str, str]) -> Call:
    """One `EmbedContentRequest` (a line of an embeddings job's file), checked like a batch of one."""
    return parse_gemini({"requests": [body]}, params)


def render_gemini_one(call: Call, answer: Answer, uid: str) -> dict[str, Any]:
    return {"embedding": {"values": vector(call.inputs[0], call.body["_size"])}}
