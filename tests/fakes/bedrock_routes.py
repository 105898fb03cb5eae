"""Amazon Bedrock's Converse API as boto3's `bedrock-runtime` client sends it.

boto3 posts to ``/model/<modelId>/converse`` (the id URL-encoded: ``%3A`` for ``:``), signed with
SigV4. Structured output arrives as ``outputConfig.textFormat`` (a JSON schema as a string,
answered with a text block holding JSON) or as a forced tool (``toolConfig`` with ``toolChoice.tool``,
answered with a ``toolUse`` block). Errors carry their code in ``__type`` (botocore reads it);
a call without a signature gets Bedrock's 403. ``stats["bedrock"]`` counts calls by
``<access key id>|<region>`` read from the signature's credential scope.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import unquote

from . import media
from .core import Answer, Call, Provider, Route, content_text, conversation, last_user
from .limits import Snapshot
from .wire import Request, Response, json_response

_SCOPE = re.compile(r"Credential=(?P<key>[^/]+)/\d{8}/(?P<region>[^/]+)/(?P<service>[a-z0-9-]+)/aws4_request")


def parse_converse(body: dict[str, Any], params: dict[str, str]) -> Call:
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages: at least one message is required")
    inference = body.get("inferenceConfig") or {}
    tool, schema = _forced_tool(body)
    if tool is None:
        fmt = (body.get("outputConfig") or {}).get("textFormat") or {}
        text = ((fmt.get("structure") or {}).get("jsonSchema") or {}).get("schema")
        schema = json.loads(text) if fmt.get("type") == "json_schema" and isinstance(text, str) else None
    turns = conversation(messages)
    system = "\n\n".join(content_text(s) for s in body.get("system") or [])
    texts = [system] + [content_text(m.get("content")) for m in messages]
    return Call(
        provider="bedrock",
        model=unquote(params["model"]),
        prompt=last_user(turns),
        input_text="\n".join(t for t in texts if t),
        turns=turns,
        schema=schema,
        tool=tool,
        max_output=inference.get("maxTokens"),
        body=body,
        media=media.bedrock(messages),
    )


def _forced_tool(body: dict[str, Any]) -> tuple[str | None, Any]:
    config = body.get("toolConfig") or {}
    wanted = ((config.get("toolChoice") or {}).get("tool") or {}).get("name")
    if wanted is None:
        return None, None
    for tool in config.get("tools") or []:
        spec = tool.get("toolSpec") or {}
        if spec.get("name") == wanted:
            return wanted, (spec.get("inputSchema") or {}).get("json")
    raise ValueError(f"toolChoice: tool {wanted!r} is not in toolConfig.tools")


def render_converse(call: Call, answer: Answer, uid: str) -> dict[str, Any]:
    if call.tool:
        block: dict[str, Any] = {"toolUse": {"toolUseId": f"tooluse_{uid}", "name": call.tool, "input": answer.value}}
        stop = "tool_use"
    else:
        block = {"text": answer.text}
        stop = "max_tokens" if answer.truncated else "end_turn"
    fresh = answer.input_tokens - answer.cache_read - answer.cache_write
    return {
        "output": {"message": {"role": "assistant", "content": [block]}},
        "stopReason": stop,
        "usage": {
            "inputTokens": fresh,
            "outputTokens": answer.output_tokens,
            "totalTokens": answer.input_tokens + answer.output_tokens,
            "cacheReadInputTokens": answer.cache_read,
            "cacheWriteInputTokens": answer.cache_write,
        },
        "metrics": {"latencyMs": 1},
    }


_CODES = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    503: "ServiceUnavailableException",
}


def error_body(status: int, message: str, call: Call | None, retry_after_s: float) -> dict[str, Any]:
    code = _CODES.get(status, "InternalServerException" if status >= 500 else "ValidationException")
    return {"__type": code, "message": message}


def quota_error(variant: Any) -> tuple[int, dict[str, Any]]:
    """An account quota spent (tokens per day): waiting a minute does not cure it."""
    message = "Your request exceeds the service quota for your account. You can view your quotas in Service Quotas."
    return 400, {"__type": "ServiceQuotaExceededException", "message": message}


def limit_headers(snap: Snapshot) -> dict[str, str]:
    return {}  # Bedrock sends no rate-limit headers


PROVIDER = Provider(
    name="bedrock",
    routes=(Route("POST", r"/model/(?P<model>[^/]+)/converse", "bedrock.converse", parse_converse, render_converse),),
    error_body=error_body,
    quota_error=quota_error,
    limit_headers=limit_headers,
    request_id_header="x-amzn-RequestId",
)


def register(app: Any) -> None:
    """Converse behind a signature check that counts calls by access key and region."""
    fake = app.fake
    converse = app._model_handler(PROVIDER, PROVIDER.routes[0])

    async def signed(request: Request, params: dict[str, str]) -> Response | None:
        who = signer(request, "bedrock")
        if who is None:
            return unsigned()
        fake.stats.bedrock[who] += 1
        return await converse(request, params)

    app.add("POST", PROVIDER.routes[0].pattern, signed)


def signer(request: Request, service: str) -> str | None:
    """`<access key id>|<region>` of a call signed for `service` (SigV4's credential scope), or
    `bearer|-` for a Bedrock API key; None: neither (AWS answers 403)."""
    auth = request.headers.get("authorization", "")
    found = _SCOPE.search(auth)
    if found is not None and found["service"] == service:
        return f"{found['key']}|{found['region']}"
    return "bearer|-" if auth.startswith("Bearer ") and service == "bedrock" else None


def unsigned() -> Response:
    message = "Missing Authentication Token"
    return json_response(403, {"__type": "MissingAuthenticationTokenException", "message": message})
