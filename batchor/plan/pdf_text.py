"""Plan stage: PDF attachments sent as their text (`pdf: text` on a step), not as files.

pypdf extracts each page's text once, at plan time; the reference then carries the text itself,
so the request key covers the content hash and what is sent, the plan counts the text's tokens
with the step's tokenizer, and every provider can take it (OpenAI-compatible servers too, and
none of the per-file PDF limits apply). The text goes after the prompt in the first user message,
one block per PDF. A PDF without a text layer (a scan) fails its row, naming `pdf: native`.
"""

from __future__ import annotations

import hashlib
import io
from functools import lru_cache
from typing import Any

from batchor.plan.media_info import PDF, MediaError

AS_TEXT = "text"  # the reference's `as` when the PDF is sent as its text


@lru_cache(maxsize=256)
def _extract(digest: str, data: bytes) -> tuple[str, int]:
    import pypdf

    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
    except Exception as exc:  # noqa: BLE001 - pypdf raises many kinds for a damaged file
        raise MediaError(f"damaged PDF ({type(exc).__name__}: {exc})") from None
    return "\n\n".join(p for p in pages if p), len(pages)


def text_reference(data: bytes, location: dict[str, Any]) -> dict[str, Any]:
    """A reference to a PDF's text (MediaError when it has none: a scanned PDF)."""
    digest = hashlib.sha256(data).hexdigest()
    text, pages = _extract(digest, data)
    if not text:
        raise MediaError("the PDF has no text layer (a scan?): send it as a file with `pdf: native`")
    return {
        "media_type": PDF,
        "sha256": digest,
        "bytes": len(data),
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
