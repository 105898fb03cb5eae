"""Raw provider responses as stored for audit: zlib with a preset dictionary.

A response is a few hundred bytes of JSON whose keys and fixed values are the same in every row,
so plain zlib only halves it; primed with a dictionary of those recurring parts (the shapes of the
OpenAI, Anthropic and Gemini answers) it stores in about a seventh. The zlib header names the
dictionary by its Adler-32, so `unpack` reads these blobs and plain zlib ones alike. Never edit
`_DICTIONARY`: add a new one to `_DICTIONARIES` and pack with it instead.
"""

from __future__ import annotations

import zlib

_DICTIONARY = (
    # Gemini generateContent
    b'{"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"STOP",'
    b'"avgLogprobs":-0.0,"index":0}],"usageMetadata":{"promptTokenCount":,"candidatesTokenCount":,'
    b'"totalTokenCount":,"promptTokensDetails":[{"modality":"TEXT","tokenCount":}],'
    b'"thoughtsTokenCount":0},"modelVersion":"gemini-2.5-flash","responseId":""}'
    # Anthropic messages (text and forced tool use)
    b'{"id":"msg_01","type":"message","role":"assistant","model":"claude-","content":[{"type":"tool_use",'
    b'"id":"toolu_01","name":"","input":{}},{"type":"text","text":""}],"stop_reason":"end_turn",'
    b'"stop_sequence":null,"usage":{"input_tokens":,"cache_creation_input_tokens":0,'
    b'"cache_read_input_tokens":0,"output_tokens":,"service_tier":"standard"}}'
    # OpenAI Responses API
    b'{"id":"resp_","object":"response","created_at":,"status":"completed","model":"gpt-","output":['
    b'{"type":"message","id":"msg_","status":"completed","role":"assistant","content":[{"type":"output_text",'
    b'"text":"","annotations":[]}]}],"usage":{"input_tokens":,"input_tokens_details":{"cached_tokens":0},'
    b'"output_tokens":,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":}}'
    # OpenAI-compatible servers (vLLM, Ollama...) and older API versions
    b'{"id":"chatcmpl-","object":"chat.completion","created":17,"model":"gpt-4.1-mini","choices":[{"index":0,'
    b'"message":{"role":"assistant","content":"{\\"","refusal":null},"logprobs":null,"finish_reason":"stop"}],'
    b'"usage":{"prompt_tokens":,"completion_tokens":,"total_tokens":,"prompt_tokens_details":{"cached_tokens":0},'
    b'"completion_tokens_details":{"reasoning_tokens":0}},"service_tier":"default","system_fingerprint":"fp_"}'
    # OpenAI Chat Completions, the most common: last, so its matches are the nearest
    b'{"id":"chatcmpl-","object":"chat.completion","created":17,"model":"gpt-4.1-mini-2025-04-14",'
    b'"choices":[{"index":0,"message":{"role":"assistant","content":"{\\"","refusal":null,'
    b'"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":,'
    b'"completion_tokens":,"total_tokens":,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},'
    b'"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,'
    b'"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_"}'
)
_DICTIONARIES = {zlib.adler32(_DICTIONARY): _DICTIONARY}


def pack(raw: bytes) -> bytes:
    """Compress one raw response (zlib stream primed with the response dictionary)."""
    packer = zlib.compressobj(6, zdict=_DICTIONARY)
    return packer.compress(raw) + packer.flush()


def unpack(blob: bytes) -> bytes:
    """The raw response of a stored blob: dictionary-primed or plain zlib (older states)."""
    if len(blob) >= 6 and blob[1] & 0x20:  # FDICT: the dictionary's Adler-32 follows the header
        dictionary = _DICTIONARIES.get(int.from_bytes(blob[2:6], "big"))
        if dictionary is None:
            raise zlib.error("raw response packed with an unknown dictionary (a newer batchor?)")
        return zlib.decompressobj(zdict=dictionary).decompress(blob)
    return zlib.decompress(blob)
