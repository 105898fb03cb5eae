"""Attachments as each API's content parts (pure): the prompt's text first, then the files in order.

- OpenAI Chat Completions: `image_url` parts (an https URL or a data URI), PDFs as `file` parts
  with base64 `file_data`; Responses: `input_image` / `input_file` parts.
- Anthropic Messages: `image` and `document` blocks with a `base64` or `url` source.
- Gemini: `inline_data` parts (base64 in JSON; the SDK decodes it to bytes).
Attachments go into the first user message, the one the step's prompt rendered.
"""

from __future__ import annotations

from typing import Any, Callable

from batchor.providers.base import Attachment, LLMRequest

Part = dict[str, Any]


def openai_chat_parts(text: str, files: tuple[Attachment, ...]) -> list[Part]:
    parts: list[Part] = [{"type": "text", "text": text}]
    for i, item in enumerate(files, start=1):
        if item.is_pdf:
            parts.append({"type": "file", "file": {"filename": f"attachment-{i}.pdf", "file_data": item.data_uri()}})
        else:
            parts.append({"type": "image_url", "image_url": {"url": item.url or item.data_uri()}})
    return parts


def openai_responses_parts(text: str, files: tuple[Attachment, ...]) -> list[Part]:
    parts: list[Part] = [{"type": "input_text", "text": text}]
    for i, item in enumerate(files, start=1):
        if not item.is_pdf:
            parts.append({"type": "input_image", "image_url": item.url or item.data_uri()})
        elif item.url:
            parts.append({"type": "input_file", "file_url": item.url})
        else:
            parts.append({"type": "input_file", "filename": f"attachment-{i}.pdf", "file_data": item.data_uri()})
    return parts


def anthropic_blocks(text: str, files: tuple[Attachment, ...]) -> list[Part]:
    blocks: list[Part] = [{"type": "text", "text": text}]
    for item in files:
        source: Part = (
            {"type": "url", "url": item.url}
            if item.url
            else {"type": "base64", "media_type": item.media_type, "data": item.base64()}
        )
        blocks.append({"type": "document" if item.is_pdf else "image", "source": source})
    return blocks


def gemini_parts(text: str, files: tuple[Attachment, ...]) -> list[Part]:
    return [{"text": text}, *({"inline_data": {"mime_type": f.media_type, "data": f.base64()}} for f in files)]


def with_parts(
    request: LLMRequest,
    messages: list[dict[str, Any]],
    content_key: str,
    build: Callable[[str, tuple[Attachment, ...]], list[Part]],
) -> list[dict[str, Any]]:
    """`messages` with the first user message's text (under `content_key`) replaced by `build`'s
    parts; unchanged when the request has no attachments."""
    if not request.attachments:
        return messages
    out = list(messages)
    for i, message in enumerate(out):
        if message.get("role") == "user":
            out[i] = {**message, content_key: build(_text(message[content_key]), request.attachments)}
            break
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
