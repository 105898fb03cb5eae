"""Plan stage: PDF attachments sent as their text (`pdf: text` on a step), not as files.

pypdf extracts each page's text once, at plan time, from the open file (a PDF over MAX_BYTES is
refused from its size before it is read: `attachment_too_large`); the reference then carries the text itself,
so the request key covers the content hash and what is sent, the plan counts the text's tokens
with the step's tokenizer, and every provider can take it (OpenAI-compatible servers too, and
none of the per-file PDF limits apply). The text goes after the prompt in the first user message,
one block per PDF. A PDF without a text layer (a scan) fails its row, naming `pdf: native`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, BinaryIO

from batchor.plan.media_info import PDF, MediaError

AS_TEXT = "text"  # the reference's `as` when the PDF is sent as its text
MAX_BYTES = 100 * 1024 * 1024  # the biggest PDF parsed for its text (pypdf holds what it parses)
_KEPT = 64  # texts remembered by content hash: steps and re-renders of one PDF parse it once
_texts: OrderedDict[str, tuple[str, int]] = OrderedDict()
_texts_lock = threading.Lock()


def too_big(size: int) -> str | None:
    """Why a PDF of `size` bytes is not parsed for its text (known before it is read), or None."""
    if size <= MAX_BYTES:
        return None
    return (
        f"{size:,} bytes: `pdf: text` parses the whole PDF to take its text, and batchor parses PDFs up to "
        f"{MAX_BYTES:,} bytes; split the PDF, or send it as a file with `pdf: native`"
    )


def _extract(digest: str, handle: BinaryIO) -> tuple[str, int]:
    with _texts_lock:
        if digest in _texts:
            _texts.move_to_end(digest)
            return _texts[digest]
    import pypdf

    try:
        reader = pypdf.PdfReader(handle)
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
    except Exception as exc:  # noqa: BLE001 - pypdf raises many kinds for a damaged file
        raise MediaError(f"damaged PDF ({type(exc).__name__}: {exc})") from None
    found = "\n\n".join(p for p in pages if p), len(pages)
    with _texts_lock:
        _texts[digest] = found
        if len(_texts) > _KEPT:
            _texts.popitem(last=False)
    return found


def text_reference(handle: BinaryIO, digest: str, size: int, location: dict[str, Any]) -> dict[str, Any]:
    """A reference to the text of the PDF open in `handle` (its SHA-256 `digest`, `size` bytes);
    MediaError when it is over MAX_BYTES or has no text (a scanned PDF)."""
    problem = too_big(size)
    if problem is not None:
        raise MediaError(problem)
    text, pages = _extract(digest, handle)
    if not text:
        raise MediaError("the PDF has no text layer (a scan?): send it as a file with `pdf: native`")
    return {
        "media_type": PDF,
        "sha256": digest,
        "bytes": size,
        "pages": pages,
        "as": AS_TEXT,
        "text": text,
        **{k: v for k, v in location.items() if k == "path"},
    }


def is_text(ref: dict[str, Any]) -> bool:
    return ref.get("as") == AS_TEXT


def text_block(ref: dict[str, Any], number: int) -> str:
    """How a PDF's text follows the prompt."""
    name = str(ref.get("path") or "").rsplit("/", 1)[-1] or f"document {number}"
    return f"--- PDF {number}: {name} ({ref.get('pages', '?')} pages) ---\n{ref['text']}"
