"""Raw responses are stored zlib-packed with a preset dictionary; plain zlib blobs still read."""

from __future__ import annotations

import json
import zlib

import pytest

from batchor.state.raw import pack, unpack

CHAT = {
    "id": "chatcmpl-AbC123",
    "object": "chat.completion",
    "created": 1764488000,
    "model": "gpt-4.1-mini-2025-04-14",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": '{"sentiment":"positive","score":4}',
                "refusal": None,
                "annotations": [],
            },
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {
        "prompt_tokens": 71,
        "completion_tokens": 9,
        "total_tokens": 80,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    },
    "service_tier": "default",
    "system_fingerprint": "fp_0123abcd",
}
CLAUDE = {
    "id": "msg_01XyZ",
    "type": "message",
    "role": "assistant",
    "model": "claude-haiku-4-5",
    "content": [{"type": "text", "text": "Bonjour – ça va? 🙂"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 12, "output_tokens": 7},
}
GEMINI = {
    "candidates": [{"content": {"parts": [{"text": "hi"}], "role": "model"}, "finishReason": "STOP"}],
    "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1, "totalTokenCount": 4},
}


@pytest.mark.parametrize("response", [CHAT, CLAUDE, GEMINI, {}, {"text": "x" * 5000}])
def test_pack_round_trips(response):
    raw = json.dumps(response, separators=(",", ":"), ensure_ascii=False).encode()
    assert unpack(pack(raw)) == raw


def test_plain_zlib_blobs_of_older_states_still_read():
    raw = json.dumps(CHAT).encode()
    assert unpack(zlib.compress(raw, 6)) == raw


def test_the_dictionary_pays_for_itself_on_a_typical_answer():
    raw = json.dumps(CHAT, separators=(",", ":")).encode()
    assert len(pack(raw)) * 2 < len(zlib.compress(raw, 6))


def test_an_unknown_dictionary_is_a_zlib_error():
    packer = zlib.compressobj(6, zdict=b"some other dictionary")
    blob = packer.compress(b'{"a":1}') + packer.flush()
    with pytest.raises(zlib.error):
        unpack(blob)
