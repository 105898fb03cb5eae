"""Plan stage: a row's attachments read, described and checked, as references in its request.

Each value of a step's `attachments:` is a local path (relative to the input file's folder unless
absolute), an `https://` URL (sent as a URL where the provider fetches it, refused otherwise:
batchor never downloads), a `data:` URI, base64 text or raw bytes. A reference holds the content's
SHA-256, type and size (pixels or pages) plus where the bytes are (`path`, `url` or `data`); only
the hash and type are keyed (`keyed_view`), so moving files does not re-run rows and changing one
does. A problem (missing, unreadable, unsupported, over a limit) becomes an error reference: the
row fails with it before any call, the run goes on.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO

from batchor.errors import (
    AttachmentChangedError,
    AttachmentError,
    AttachmentMissingError,
    AttachmentTooLargeError,
    AttachmentUnsupportedError,
)
from batchor.plan.media_info import HEAD_BYTES, PDF, MediaError, MediaInfo, describe, describe_file, sniff
from batchor.plan.media_limits import file_problem, limits_for, request_problem
from batchor.plan.pdf_text import MAX_BYTES as MAX_TEXT_BYTES
from batchor.plan.pdf_text import is_text, text_reference
from batchor.plan.pdf_text import too_big as too_big_for_text
from batchor.providers.base import Attachment

ATTACHMENTS = "attachments"  # key of the reference list in the user message
_DATA_URI = re.compile(r"^data:([\w.+-]+/[\w.+-]+)?(;[\w=.+-]+)*;base64,", re.IGNORECASE)
_GLOB = re.compile(r"[*?\[]")
_PATH_MAX = 4096


@dataclass(frozen=True, slots=True)
class AttachmentContext:
    """What describing a step's attachments needs: where relative paths start, whose limits apply."""

    folder: Path
    provider: str  # the provider whose rules apply (the real one, also under --mock)
    check_limits: bool = True
    pdf_text: bool = False  # `pdf: text`: PDFs are sent as their text (plan/pdf_text.py)


def input_folder(base_dir: Path, input_path: str) -> Path:
    """The folder relative attachment paths start from: the input file's (a glob's fixed part)."""
    parts = Path(input_path).parts
    first_glob = next((i for i, part in enumerate(parts) if _GLOB.search(part)), None)
    if first_glob is None:
        return (base_dir / input_path).parent
    return base_dir.joinpath(*parts[:first_glob])


def describe_row(values: list[Any], row_key: str, ctx: AttachmentContext) -> list[dict[str, Any]]:
    """References for one row's attachment values; error references where something is wrong."""
    refs = [
        _reference(value, f"row {row_key}: attachment {i + 1} ({_shown(value)})", ctx) for i, value in enumerate(values)
    ]
    good = [r for r in refs if "error" not in r and not is_text(r)]  # a PDF's text is no file
    problem = request_problem(limits_for(ctx.provider), good, ctx.provider) if ctx.check_limits else None
    if problem is not None:
        refs.append(_error("attachment_too_large", f"row {row_key}: {problem}"))
    return refs


def keyed_view(refs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What of each reference goes into the request key: content hash and type, or the URL, or
    the error; never the path or the inline data (the hash stands for them)."""
    return [
        {k: v for k, v in ref.items() if k in ("sha256", "media_type", "url", "error", "detail", "as")} for ref in refs
    ]


def _reference(value: Any, where: str, ctx: AttachmentContext) -> dict[str, Any]:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _from_bytes(bytes(value), where, ctx)
    if not isinstance(value, str):
        return _error("attachment_invalid", f"{where}: expected a path, URL or data, got {type(value).__name__}")
    text = value.strip()
    if text.lower().startswith("https://"):
        if ctx.pdf_text and _url_type(text) == PDF:
            return _error(
                "attachment_unsupported",
                f"{where}: a PDF URL cannot be sent as text (batchor never "
                "downloads files): give a local path, or use `pdf: native`",
            )
        return _checked({"media_type": _url_type(text), "url": text}, where, ctx)
    if text.lower().startswith("http://"):
        return _error("attachment_unsupported", f"{where}: only https:// URLs are sent (never plain http)")
    if _DATA_URI.match(text):
        return _from_inline(text.split(",", 1)[1], where, ctx)
    if len(text) < _PATH_MAX:
        path = Path(text).expanduser()
        path = path if path.is_absolute() else ctx.folder / path
        if path.is_file():
            return _from_file(path, where, ctx)
    inline = _from_inline(text, where, ctx) if len(text) >= 64 else None
    if inline is not None and "error" not in inline:
        return inline
    return _error("attachment_missing", f"{where}: no file at {path if len(text) < _PATH_MAX else '(too long)'}")


def _from_file(path: Path, where: str, ctx: AttachmentContext) -> dict[str, Any]:
    try:
        stat = path.stat()
        too_big = _too_big_to_send(path, stat.st_size, ctx)
        if too_big:
            return _error("attachment_too_large", f"{where}: {path}: {too_big}")
        info, digest, size = _read_file(str(path), stat.st_mtime_ns, stat.st_size)
        if ctx.pdf_text and info.media_type == PDF:
            with open(path, "rb") as handle:
                return _as_text(handle, digest, size, {"path": str(path)}, where)
    except OSError as exc:
        return _error("attachment_missing", f"{where}: cannot read {path}: {exc.strerror or exc}")
    except MediaError as exc:
        return _error("attachment_unsupported", f"{where}: {path}: {exc}")
    return _checked(_described(info, digest, size, {"path": str(path)}), where, ctx)


def _too_big_to_send(path: Path, size: int, ctx: AttachmentContext) -> str | None:
    """Why a file of `size` bytes can never be sent, known from its size (and, for `pdf: text`,
    its first bytes) alone, so a file of gigabytes is never read to find out; None when it may fit."""
    text = ctx.pdf_text and _is_pdf(path, size)
    if text:
        return too_big_for_text(size)
    if not ctx.check_limits:
        return None
    limit = limits_for(ctx.provider).max_request_bytes
    if size * 4 // 3 <= limit:  # base64 makes 3 bytes 4
        return None
    return f"{size:,} bytes is more than {ctx.provider} accepts in a whole request ({limit:,} bytes as base64)"


def _is_pdf(path: Path, size: int) -> bool:
    """Whether a file big enough to matter is a PDF, from its first bytes."""
    if size <= min(MAX_TEXT_BYTES, 1 << 20):
        return False  # small: read whole later anyway, and under every size limit here
    with open(path, "rb") as handle:
        return sniff(handle.read(HEAD_BYTES)) == PDF


@lru_cache(maxsize=4096)
def _read_file(path: str, mtime_ns: int, size: int) -> tuple[MediaInfo, str, int]:
    """Type, size in pixels or pages, and SHA-256 of a file, once per version of it (steps and
    re-renders share it), read a chunk at a time: the file is never held in memory whole."""
    with open(path, "rb") as handle:
        info = describe_file(handle)
        handle.seek(0)
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
    return info, digest, size


def _from_inline(text: str, where: str, ctx: AttachmentContext) -> dict[str, Any]:
    try:
        data = base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        return _error("attachment_invalid", f"{where}: not valid base64 data")
    return _from_bytes(data, where, ctx)


def _from_bytes(data: bytes, where: str, ctx: AttachmentContext) -> dict[str, Any]:
    """The reference of data given in memory (bytes, or inline base64 decoded). A PDF to be sent
    as text over the size limit is refused from its size and first bytes, as a file is
    (`_too_big_to_send`), before it is parsed, hashed or encoded: pypdf looking for the end of
    100 MB took 10 CPU-seconds."""
    if ctx.pdf_text and sniff(data[:HEAD_BYTES]) == PDF:
        too_big = too_big_for_text(len(data))
        if too_big:
            return _error("attachment_too_large", f"{where}: {too_big}")
    try:
        info = describe(data)
    except MediaError as exc:
        return _error("attachment_unsupported", f"{where}: {exc}")
    digest = hashlib.sha256(data).hexdigest()
    where_bytes = {"data": base64.b64encode(data).decode("ascii")}
    if ctx.pdf_text and info.media_type == PDF:
        return _as_text(io.BytesIO(data), digest, len(data), where_bytes, where)
    return _checked(_described(info, digest, len(data), where_bytes), where, ctx)


def _as_text(handle: BinaryIO, digest: str, size: int, location: dict[str, Any], where: str) -> dict[str, Any]:
    try:
        return text_reference(handle, digest, size, location)
    except MediaError as exc:
        return _error("attachment_unsupported", f"{where}: {exc}")


def _described(info: MediaInfo, digest: str, size: int, location: dict[str, Any]) -> dict[str, Any]:
    ref: dict[str, Any] = {"media_type": info.media_type, "sha256": digest, "bytes": size, **location}
    if info.pages:
        ref["pages"] = info.pages
    else:
        ref["width"], ref["height"] = info.width, info.height
    return ref


def _checked(ref: dict[str, Any], where: str, ctx: AttachmentContext) -> dict[str, Any]:
    if ref["media_type"] is None:
        return _error(
            "attachment_unsupported",
            f"{where}: the URL does not end in .png, .jpg, .jpeg, .gif, .webp or .pdf, so its type is unknown",
        )
    problem = file_problem(limits_for(ctx.provider), ref, ctx.provider) if ctx.check_limits else None
    if problem is None:
        return ref
    code = "attachment_unsupported" if "does not" in problem else "attachment_too_large"
    return _error(code, f"{where}: {problem}")


_URL_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".pdf": "application/pdf",
}


def _url_type(url: str) -> str | None:
    """A URL's type from its path's extension (it is never fetched to look)."""
    path = url.split("?", 1)[0].split("#", 1)[0]
    return _URL_TYPES.get(os.path.splitext(path)[1].lower())


def _error(code: str, detail: str) -> dict[str, Any]:
    return {"error": code, "detail": detail}


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else f"<{len(value) if hasattr(value, '__len__') else '?'} bytes>"
    return text if len(text) <= 80 else text[:40] + "..." + f"<{len(text)} chars>"


_ERRORS: dict[str, type[AttachmentError]] = {
    "attachment_missing": AttachmentMissingError,
    "attachment_unsupported": AttachmentUnsupportedError,
    "attachment_too_large": AttachmentTooLargeError,
}


def load(refs: list[dict[str, Any]]) -> tuple[Attachment, ...]:
    """The attachments to send, from a request's references: a planned problem is raised as its
    coded error (the row fails, nothing is sent); a file whose content changed since the plan too."""
    for ref in refs:
        if "error" in ref:
            raise _ERRORS.get(ref["error"], AttachmentError)(ref["detail"] + " (not sent)")
    return tuple(_load_one(ref) for ref in refs if not is_text(ref))


def _load_one(ref: dict[str, Any]) -> Attachment:
    if "url" in ref:
        return Attachment(ref["media_type"], url=ref["url"])
    if "data" in ref:
        return Attachment(ref["media_type"], data=base64.b64decode(ref["data"]))
    try:
        data = Path(ref["path"]).read_bytes()
    except OSError as exc:
        raise AttachmentMissingError(
            f"attachment {ref['path']} cannot be read since the plan: {exc.strerror or exc} (not sent)"
        ) from None
    if hashlib.sha256(data).hexdigest() != ref["sha256"]:
        raise AttachmentChangedError(
            f"attachment {ref['path']} changed since the plan (not sent)",
            hint="run `batchor plan` again to send the new content",
        )
    return Attachment(ref["media_type"], data=data)
