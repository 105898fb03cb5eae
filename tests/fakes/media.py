"""Image and document parts of each provider's requests, checked as the provider checks them.

Each parser returns one record per attachment (kind, media type, byte length and SHA-256 of the
decoded bytes, or the URL), so a test proves which bytes arrived; a malformed part raises
ValueError (a 400, as the real API answers).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
PDF = "application/pdf"
_SIGNATURES = {
    "image/png": b"\x89PNG",
    "image/jpeg": b"\xff\xd8",
    "image/gif": b"GIF8",
    "image/webp": b"RIFF",
    PDF: b"%PDF",
}


def _decoded(media_type: str, data: Any, where: str, urlsafe: bool = False) -> dict[str, Any]:
    if not isinstance(data, str):
        raise ValueError(f"{where}: base64 data must be a string")
    if urlsafe:  # protobuf JSON (Gemini) takes either alphabet; google-genai sends the URL-safe one
        data = data.replace("-", "+").replace("_", "/")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{where}: invalid base64 data") from None
    signature = _SIGNATURES.get(media_type)
    if signature is None:
        raise ValueError(f"{where}: unsupported media type {media_type!r}")
    if not raw.startswith(signature):
        raise ValueError(f"{where}: the data is not a valid {media_type}")
    kind = "document" if media_type == PDF else "image"
    return {"kind": kind, "media_type": media_type, "bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}


def _data_uri(uri: Any, where: str) -> dict[str, Any]:
    if not isinstance(uri, str):
        raise ValueError(f"{where}: url must be a string")
    if uri.startswith("https://"):
        return {"kind": "url", "url": uri}
    head, _, data = uri.partition(",")
    if not (head.startswith("data:") and head.endswith(";base64")):
        raise ValueError(f"{where}: expected an https URL or a base64 data URI")
    return _decoded(head[5:-7], data, where)


def openai_chat(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for part in _parts(messages, "content"):
        kind = part.get("type")
        if kind == "image_url":
            found.append(_data_uri((part.get("image_url") or {}).get("url"), "image_url.url"))
        elif kind == "file":
            file = part.get("file") or {}
            if not file.get("filename"):
                raise ValueError("file.filename is required with file_data")
            found.append(_data_uri(file.get("file_data"), "file.file_data"))
            if found[-1].get("media_type") != PDF:
                raise ValueError("Chat Completions file inputs accept only PDF")
        elif kind != "text":
            raise ValueError(f"unsupported content part type {kind!r}")
    return found


def openai_responses(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for part in _parts(items, "content"):
        kind = part.get("type")
        if kind == "input_image":
            found.append(_data_uri(part.get("image_url"), "input_image.image_url"))
        elif kind == "input_file":
            url = part.get("file_url")
            found.append({"kind": "url", "url": url} if url else _data_uri(part.get("file_data"), "input_file"))
        elif kind not in ("input_text", "output_text"):
            raise ValueError(f"unsupported content part type {kind!r}")
    return found


def anthropic(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for block in _parts(messages, "content"):
        kind = block.get("type")
        if kind not in ("image", "document"):
            continue
        source = block.get("source") or {}
        if source.get("type") == "url":
            found.append({"kind": "url", "url": source["url"]})
            continue
        if source.get("type") != "base64":
            raise ValueError(f"{kind}.source.type must be base64 or url")
        allowed = IMAGE_TYPES if kind == "image" else (PDF,)
        if source.get("media_type") not in allowed:
            raise ValueError(f"{kind}.source.media_type: Input should be one of {', '.join(allowed)}")
        found.append(_decoded(source["media_type"], source.get("data"), f"{kind}.source.data"))
    return found


def gemini(contents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for part in _parts(contents, "parts"):
        blob = part.get("inlineData") or part.get("inline_data")
        if blob is None:
            continue
        mime = blob.get("mimeType") or blob.get("mime_type")
        found.append(_decoded(str(mime), blob.get("data"), "inline_data.data", urlsafe=True))
    return found


def _parts(messages: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for message in messages:
        content = message.get(key) if isinstance(message, dict) else None
        if isinstance(content, list):
            parts += [p for p in content if isinstance(p, dict)]
    return parts


def bedrock(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Converse `image` and `document` blocks: base64 `bytes` (as boto3 encodes them) or an S3 location."""
    found = []
    for block in _parts(messages, "content"):
        for kind in ("image", "document"):
            if kind not in block:
                continue
            part = block[kind] or {}
            source = part.get("source") or {}
            if "s3Location" in source:
                found.append({"kind": "url", "url": source["s3Location"].get("uri")})
                continue
            media_type = PDF if kind == "document" else f"image/{part.get('format')}"
            if kind == "document" and part.get("format") != "pdf":
                raise ValueError(f"document.format: the fake takes pdf, not {part.get('format')!r}")
            found.append(_decoded(media_type, source.get("bytes"), f"{kind}.source.bytes"))
    return found
