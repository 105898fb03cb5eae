"""Amazon Bedrock: the Converse API through boto3's `bedrock-runtime` client.

A model block's `name` is a Bedrock model id or inference profile (`anthropic.claude-3-haiku-...`,
`us.amazon.nova-micro-v1:0`). Region and credentials come from AWS's usual sources (AWS_REGION,
AWS_PROFILE, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, an SSO or instance role, or a Bedrock API
key in AWS_BEARER_TOKEN_BEDROCK); `options.region` overrides the region and `base_url` (else
AWS_ENDPOINT_URL_BEDROCK_RUNTIME) the endpoint. boto3 is synchronous: each call runs on a thread
of the adapter's own pool, the event loop never waits on it.

`to_body`/`parse_result` are pure (the body is Converse's request as boto3 takes it: attachments
as raw bytes); the SDK call is in `complete`, wrapped by `_mapped_errors`. A schema goes as
`outputConfig.textFormat` (Bedrock's structured outputs), or as a forced tool where the model
predates them (older Claude models, and every other family: `options.structured` chooses).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import os
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

from batchor.errors import (
    AuthenticationError,
    BaseUrlMissingError,
    ContextLengthError,
    InvalidRequestError,
    ModelNotFoundError,
    NoApiKeyError,
    ProviderError,
    QuotaExhaustedError,
    RateLimitedError,
    TransientProviderError,
)
from batchor.providers import base_url
from batchor.providers.anthropic.realtime import OUTPUT_CONFIG, TOOL
from batchor.providers.anthropic.realtime import structured_mode as anthropic_mode
from batchor.providers.base import (
    Attachment,
    Completion,
    LLMRequest,
    ProviderConfig,
    ToolCall,
    answer_tool,
    refused,
)
from batchor.providers.caching import bedrock_cache_point
from batchor.providers.errors_map import classify
from batchor.providers.unreachable import unreachable

BEARER_ENV = "AWS_BEARER_TOKEN_BEDROCK"  # a Bedrock API key: botocore sends it instead of signing
CREDENTIAL_HINT = (
    "set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_BEARER_TOKEN_BEDROCK (a Bedrock "
    "API key), or run with an instance or SSO role; rehearse offline with `--mock`"
)
_THREADS = 64  # Converse calls in flight at once per model block (threads, and pooled connections)
# Cross-region inference profiles prefix the model id (`us.anthropic.claude-...`).
_PROFILES = ("us.", "eu.", "apac.", "us-gov.", "global.", "jp.", "au.", "ca.")
_INFERENCE = {"max_tokens": "maxTokens", "temperature": "temperature", "top_p": "topP"}
# Sent to the model itself (Converse's `additionalModelRequestFields`): the model family's names.
_MODEL_FIELDS = frozenset({"top_k"})
_IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}
_REFUSALS = {
    "content_filtered": "the model's content filter blocked the answer",
    "guardrail_intervened": "a Bedrock guardrail blocked the answer",
}
# Converse error codes as batchor's classes (the rest go through the shared map by status).
_RATE_CODES = frozenset({"ThrottlingException", "ModelNotReadyException", "TooManyRequestsException"})
_AUTH_CODES = frozenset({
    "AccessDeniedException", "UnrecognizedClientException", "ExpiredTokenException",
    "InvalidSignatureException", "IncompleteSignature", "MissingAuthenticationTokenException",
})  # fmt: skip
_TRANSIENT_CODES = frozenset({
    "ModelTimeoutException", "InternalServerException", "ServiceUnavailableException", "ModelErrorException",
})  # fmt: skip


def model_family(model: str) -> str:
    """The provider part of a Bedrock model id: `anthropic` for `us.anthropic.claude-...`."""
    bare = model.split(".", 1)[1] if model.startswith(_PROFILES) else model
    return bare.split(".", 1)[0]


def structured_mode(model: str, *, strict: bool = True, option: str | None = None) -> str:
    """`output_config` for the Claude models that have structured outputs, a forced tool for
    older Claude models and for other families (unless `options.structured` says otherwise)."""
    if option in (OUTPUT_CONFIG, TOOL):
        return option
    if model_family(model) != "anthropic":
        return TOOL
    bare = model.split("anthropic.", 1)[1]
    return anthropic_mode(bare, strict=strict)


def to_body(request: LLMRequest, *, structured: str = TOOL) -> dict[str, Any]:
    """The keyword arguments of `client.converse(...)` (boto3 encodes bytes itself)."""
    inference, extra = _params(request.params)
    system = [{"text": m["content"]} for m in request.messages if m["role"] == "system"]
    messages: list[dict[str, Any]] = [
        {"role": m["role"], "content": [{"text": m["content"]}]} for m in request.messages if m["role"] != "system"
    ]
    if request.attachments:
        first = next(i for i, m in enumerate(messages) if m["role"] == "user")
        messages[first]["content"] = [*messages[first]["content"], *_blocks(request.attachments)]
    body: dict[str, Any] = {"modelId": request.model, "messages": messages, "inferenceConfig": inference}
    if system:
        body["system"] = system
    if extra:
        body["additionalModelRequestFields"] = extra
    body = bedrock_cache_point(body, request.cache, len(system))
    if request.schema is not None and structured == TOOL:
        name = answer_tool(request.schema_name)
        spec = {"name": name, "description": "Record the answer in the required structure."}
        body["toolConfig"] = {
            "tools": [{"toolSpec": {**spec, "inputSchema": {"json": request.schema}}}],
            "toolChoice": {"tool": {"name": name}},
        }
    elif request.schema is not None:
        schema = {"schema": json.dumps(request.schema, ensure_ascii=False), "name": answer_tool(request.schema_name)}
        body["outputConfig"] = {"textFormat": {"type": "json_schema", "structure": {"jsonSchema": schema}}}
    return body


def _params(params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(inferenceConfig, additionalModelRequestFields) from the spec's params (OpenAI's names too:
    `max_completion_tokens`, `stop`; the OpenAI-only ones have no Converse equivalent)."""
    inference = {_INFERENCE[k]: v for k, v in params.items() if k in _INFERENCE}
    inference["maxTokens"] = int(params.get("max_tokens") or params.get("max_completion_tokens") or 1024)
    stop = params.get("stop_sequences", params.get("stop"))
    if stop is not None:
        inference["stopSequences"] = [stop] if isinstance(stop, str) else list(stop)
    return inference, {k: v for k, v in params.items() if k in _MODEL_FIELDS}


def shown(body: dict[str, Any]) -> dict[str, Any]:
    """The converse arguments as JSON can show them: bytes as the base64 text boto3 sends."""
    return {key: _shown(value) for key, value in body.items()}


def _shown(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {key: _shown(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shown(item) for item in value]
    return value


def _blocks(files: tuple[Attachment, ...]) -> list[dict[str, Any]]:
    blocks = []
    for i, item in enumerate(files, start=1):
        if item.url is not None and not item.url.startswith("s3://"):
            raise InvalidRequestError(
                f"Bedrock reads attachments as bytes or from s3://, not from {item.url.split('/')[2]}",
                status=None,
            )
        source = {"s3Location": {"uri": item.url}} if item.url else {"bytes": item.data or b""}
        if item.is_pdf:
            blocks.append({"document": {"format": "pdf", "name": f"attachment-{i}", "source": source}})
        else:
            blocks.append({"image": {"format": _IMAGE_FORMATS.get(item.media_type, "png"), "source": source}})
    return blocks


def parse_result(data: dict[str, Any]) -> Completion:
    """A Completion from a Converse answer (a forced tool's `input` becomes the JSON text)."""
    content = ((data.get("output") or {}).get("message") or {}).get("content") or []
    texts, calls, tool_input = [], [], None
    for block in content:
        if "text" in block:
            texts.append(str(block["text"] or ""))
        elif isinstance(block.get("toolUse"), dict):
            use = block["toolUse"]
            calls.append(ToolCall(str(use.get("name") or "?"), use.get("input")))
            tool_input = use.get("input") if tool_input is None else tool_input
    text = json.dumps(tool_input, ensure_ascii=False) if tool_input is not None else "".join(texts)
    usage = data.get("usage") or {}
    cache_read = int(usage.get("cacheReadInputTokens") or 0)
    cache_write = int(usage.get("cacheWriteInputTokens") or 0)
    completion = Completion(
        text=text,
        tool_calls=tuple(calls),
        input_tokens=int(usage.get("inputTokens") or 0) + cache_read + cache_write,
        output_tokens=int(usage.get("outputTokens") or 0),
        cached_input_tokens=cache_read,
        cache_write_tokens=cache_write,
        finish_reason=data.get("stopReason"),
        raw={k: v for k, v in data.items() if k != "ResponseMetadata"},
        usage_known=bool(usage),
    )
    if data.get("stopReason") in _REFUSALS:
        raise refused(f"{_REFUSALS[data['stopReason']]} (stopReason: {data['stopReason']})", completion)
    return completion


def error_for(status: int | None, code: str, message: str) -> ProviderError:
    """A Converse error (its `__type` code and HTTP status) as batchor's class."""
    if code in _RATE_CODES:
        return RateLimitedError(message, status=status or 429)
    if code == "ServiceQuotaExceededException":  # an account quota (tokens per day): waiting a minute will not help
        return QuotaExhaustedError(message, status=status)
    if code in _AUTH_CODES:
        return AuthenticationError(message, status=status)
    if code in _TRANSIENT_CODES:
        return TransientProviderError(message, status=status)
    if code == "ResourceNotFoundException" or (code == "ValidationException" and "model identifier" in message):
        return ModelNotFoundError(message, status=status)
    if code == "ValidationException" and ("too long" in message.lower() or "context window" in message.lower()):
        return ContextLengthError(message, status=status)
    return classify(status, message, code)


class BedrockProvider:
    name = "bedrock"

    def __init__(self, client: Any, *, strict: bool, option: str | None, secrets: tuple[str, ...]) -> None:
        self.client, self.strict, self.option = client, strict, option
        self._secrets = secrets
        self._url = str(client.meta.endpoint_url)
        self._pool = ThreadPoolExecutor(max_workers=_THREADS, thread_name_prefix="batchor-bedrock")
        # boto3 releases before Bedrock's structured outputs cannot send outputConfig: a forced tool then
        converse = client.meta.service_model.operation_model("Converse").input_shape.members
        self._output_config = "outputConfig" in converse

    async def complete(self, request: LLMRequest) -> Completion:
        mode = structured_mode(request.model, strict=self.strict, option=self.option)
        body = to_body(request, structured=mode if self._output_config else TOOL)
        loop = asyncio.get_running_loop()
        async with _mapped_errors(self._secrets, self._url):
            data = await loop.run_in_executor(self._pool, functools.partial(self.client.converse, **body))
        return parse_result(data)

    async def aclose(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.client.close()


@asynccontextmanager
async def _mapped_errors(secrets: tuple[str, ...], url: str) -> AsyncIterator[None]:
    """botocore's errors as batchor's; `url` (the client's endpoint) names where a connection failed."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, ParamValidationError

    from batchor.errors import redact

    try:
        yield
    except ClientError as exc:
        error = exc.response.get("Error") or {}
        status = (exc.response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        message = redact(str(error.get("Message") or exc), list(secrets))
        raise error_for(int(status) if status else None, str(error.get("Code") or ""), message) from None
    except ParamValidationError as exc:  # a body this boto3 release cannot send: no call was made
        raise InvalidRequestError(f"boto3 refused the request: {exc}", status=None) from None
    except NoCredentialsError:
        raise NoApiKeyError("No AWS credentials for provider 'bedrock'", hint=CREDENTIAL_HINT) from None
    except BotoCoreError as exc:  # connect and read timeouts, refused connections, a body cut short
        raise unreachable(exc, url, secrets[0] if secrets else None) from None


def bedrock_client(config: ProviderConfig, service: str = "bedrock-runtime") -> tuple[Any, tuple[str, ...]]:
    """boto3's client for `service` in the model block's region, and the secrets it holds (for
    redaction). Credentials are looked up now, so missing ones fail before any request."""
    import boto3
    from botocore.config import Config

    session = boto3.Session()
    region = config.options.get("region") or os.environ.get("AWS_REGION") or session.region_name
    if not region:
        raise BaseUrlMissingError(
            "provider 'bedrock' needs an AWS region",
            hint="set AWS_REGION (or AWS_DEFAULT_REGION, or a profile's region), or add `options: {region: us-east-1}`",
        )
    credentials = session.get_credentials()
    bearer = os.environ.get(BEARER_ENV, "").strip()
    if credentials is None and not bearer:
        raise NoApiKeyError("No AWS credentials for provider 'bedrock'", hint=CREDENTIAL_HINT)
    frozen = credentials.get_frozen_credentials() if credentials is not None else None
    secrets = tuple(s for s in (bearer, frozen and frozen.secret_key, frozen and frozen.token) if s)
    settings = Config(
        retries={"total_max_attempts": 1},  # batchor retries; botocore would repeat a billed call unseen
        connect_timeout=min(config.timeout_s, 10.0),
        read_timeout=config.timeout_s,
        max_pool_connections=_THREADS,
        user_agent_extra="batchor",
    )
    # None: the region's own endpoint (or AWS_ENDPOINT_URL_<SERVICE>, which botocore reads itself)
    endpoint = base_url(config.provider, config.base_url) if service == "bedrock-runtime" else None
    client = session.client(service, region_name=region, endpoint_url=endpoint, config=settings)
    return client, secrets


def create(config: ProviderConfig, info: Any) -> BedrockProvider:
    client, secrets = bedrock_client(config)
    option = config.options.get("structured")
    return BedrockProvider(client, strict=bool(config.options.get("strict", True)), option=option, secrets=secrets)
