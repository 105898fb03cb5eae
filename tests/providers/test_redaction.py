"""The key never leaks through an adapter's error mapping, even when the SDK error quotes it."""

from __future__ import annotations

import asyncio

import httpx2
import pytest

from batchor.errors import AuthenticationError, ProviderError, TransientProviderError
from batchor.providers.anthropic import realtime as anthropic_adapter
from batchor.providers.gemini import realtime as gemini_adapter
from batchor.providers.openai import realtime as openai_adapter

SECRET = "sk-leaky-secret-0123456789"
REQUEST = httpx2.Request("POST", "http://127.0.0.1:9/v1/x")


def _raise_inside(mapped, exc: BaseException) -> ProviderError:
    async def run() -> None:
        async with mapped(SECRET):
            raise exc

    with pytest.raises(ProviderError) as caught:
        asyncio.run(run())
    assert SECRET not in str(caught.value) and SECRET not in repr(caught.value.details)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    return caught.value


def _status_error(module, status: int, body: dict):
    response = httpx2.Response(status, request=REQUEST, json=body)
    return module.APIStatusError(f"Error code: {status} - {body}", response=response, body=body)


def test_openai_status_error():
    import openai

    body = {"error": {"message": f"Incorrect API key provided: {SECRET}", "code": "invalid_api_key"}}
    error = _raise_inside(openai_adapter._mapped_errors, _status_error(openai, 401, body))
    assert isinstance(error, AuthenticationError) and "[REDACTED]" in error.message


def test_anthropic_status_error():
    import anthropic

    body = {"type": "error", "error": {"type": "authentication_error", "message": f"invalid x-api-key {SECRET}"}}
    error = _raise_inside(anthropic_adapter._mapped_errors, _status_error(anthropic, 401, body))
    assert isinstance(error, AuthenticationError) and "[REDACTED]" in error.message


def test_anthropic_connection_error():
    import anthropic

    exc = anthropic.APIConnectionError(message=f"cannot reach host with {SECRET}", request=REQUEST)
    assert isinstance(_raise_inside(anthropic_adapter._mapped_errors, exc), TransientProviderError)


def test_gemini_api_error():
    from google.genai import errors

    body = {"error": {"code": 400, "message": f"API key not valid: {SECRET}", "status": "INVALID_ARGUMENT"}}
    error = _raise_inside(gemini_adapter._mapped_errors, errors.ClientError(400, body))
    assert isinstance(error, AuthenticationError)


def test_gemini_transport_error():
    exc = httpx2.ConnectError(f"connect failed ?key={SECRET}", request=REQUEST)
    assert isinstance(_raise_inside(gemini_adapter._mapped_errors, exc), TransientProviderError)


def test_a_key_quoted_in_part_is_redacted_and_nothing_else():
    from batchor.errors import redact

    key = "sk-proj-Ab12Cd34Ef56Gh78Ij90"
    text = f"Incorrect API key provided: {key[:12]}************{key[-4:]}. Model gpt-4.1-mini, key {key}."
    assert redact(text, [key]) == (
        "Incorrect API key provided: [REDACTED]************Ij90. Model gpt-4.1-mini, key [REDACTED]."
    )
