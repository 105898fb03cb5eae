"""What an attachment is, from its first bytes: media type, pixel size or page count.

Images are measured from their headers (PNG IHDR, JPEG start-of-frame, GIF screen descriptor,
WebP VP8/VP8L/VP8X chunk) without decoding pixels; PDFs are counted with pypdf when it is
installed, else by counting `/Type /Page` objects (an estimate, marked as such). The type comes
from the content, never from a file name, so a mislabelled file is still described correctly.
"""

from __future__ import annotations

import io
import re
import struct
from dataclasses import dataclass
from typing import BinaryIO

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
PDF = "application/pdf"
_JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # SOFn markers (not DHT/JPG/DAC)
_PAGE_OBJECT = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")
HEAD_BYTES = 1 << 16  # what is read of a file to know its type (and most images' size)
CHUNK_BYTES = 1 << 20  # files are hashed and scanned this much at a time
_OVERLAP = 64  # bytes of a chunk read again with the next, so a match across them is found


@dataclass(frozen=True, slots=True)
class MediaInfo:
    """A file's type and size in the unit its token rule needs (pixels or pages)."""

    media_type: str
    width: int = 0
    height: int = 0
    pages: int = 0
    pages_estimated: bool = False  # counted without a PDF parser


class MediaError(ValueError):
    """The bytes are not a supported image or PDF, or their header is damaged."""


def sniff(data: bytes) -> str | None:
    """The media type of `data` from its signature, or None when unsupported."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:1024].lstrip().startswith(b"%PDF-"):
        return PDF
    return None


def describe(data: bytes) -> MediaInfo:
    """Type and size of an image or PDF; MediaError when it is neither or its header is broken."""
    return describe_file(io.BytesIO(data))


def describe_file(handle: BinaryIO) -> MediaInfo:
    """`describe` of an open file, read from its start: an image's header, a JPEG's markers by
    seeking past their segments, a PDF's page tree by pypdf's own seeks. A file of any size is
    never held in memory whole."""
    head = handle.read(HEAD_BYTES)
    kind = sniff(head)
    if kind is None:
        raise MediaError("not a PNG, JPEG, GIF, WebP image or a PDF (unknown file signature)")
    try:
        if kind == PDF:
            handle.seek(0)
            pages, estimated = pdf_pages_of(handle)
            return MediaInfo(kind, pages=pages, pages_estimated=estimated)
        width, height = _jpeg(handle) if kind == "image/jpeg" else _MEASURE[kind](head)
    except (struct.error, IndexError) as exc:
        raise MediaError(f"damaged {kind} header ({exc})") from None
    if width <= 0 or height <= 0:
        raise MediaError(f"damaged {kind} header (size {width}x{height})")
    return MediaInfo(kind, width, height)


def _png(data: bytes) -> tuple[int, int]:
    if data[12:16] != b"IHDR":
        raise MediaError("damaged image/png header (no IHDR chunk)")
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


def _gif(data: bytes) -> tuple[int, int]:
    width, height = struct.unpack("<HH", data[6:10])
    return int(width), int(height)


def _jpeg(handle: BinaryIO) -> tuple[int, int]:
    """Walk the markers to the start-of-frame, seeking over each segment (an EXIF block with a
    thumbnail may put it far from the start)."""
    handle.seek(2)
    while True:
        marker_at = handle.read(4)
        if len(marker_at) < 4:
            raise MediaError("damaged image/jpeg header (no start-of-frame marker)")
        if marker_at[0] != 0xFF:
            raise MediaError("damaged image/jpeg header (marker expected)")
        marker = marker_at[1]
        if marker == 0xFF:  # fill byte
            handle.seek(-3, io.SEEK_CUR)
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # markers without a length
            handle.seek(-2, io.SEEK_CUR)
            continue
        (length,) = struct.unpack(">H", marker_at[2:4])
        if marker in _JPEG_FRAMES:
            height, width = struct.unpack(">HH", handle.read(5)[1:5])
            return int(width), int(height)
        handle.seek(int(length) - 2, io.SEEK_CUR)


def _webp(data: bytes) -> tuple[int, int]:
    chunk = data[12:16]
    if chunk == b"VP8 ":
        width, height = struct.unpack("<HH", data[26:30])
        return int(width) & 0x3FFF, int(height) & 0x3FFF
    if chunk == b"VP8L":
        (bits,) = struct.unpack("<I", data[21:25])
        return (int(bits) & 0x3FFF) + 1, ((int(bits) >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return width, height
    raise MediaError(f"damaged image/webp header (unknown chunk {chunk!r})")


_MEASURE = {"image/png": _png, "image/gif": _gif, "image/webp": _webp}  # from the header alone


def pdf_pages(data: bytes) -> tuple[int, bool]:
    """(pages, estimated): pypdf's count when installed, else the `/Type /Page` objects."""
    return pdf_pages_of(io.BytesIO(data))


def pdf_pages_of(handle: BinaryIO) -> tuple[int, bool]:
    """`pdf_pages` of an open file (pypdf seeks to what it needs; the estimate reads in chunks)."""
    try:
        import pypdf
    except ImportError:
        return max(1, _count_page_objects(handle)), True
    try:
        return len(pypdf.PdfReader(handle).pages), False
    except Exception as exc:  # noqa: BLE001 - pypdf raises many kinds for a damaged file
        raise MediaError(f"damaged PDF ({type(exc).__name__}: {exc})") from None


def _count_page_objects(handle: BinaryIO) -> int:
    """`/Type /Page` objects, read a chunk at a time: a match is counted in the chunk where it
    starts before the last `_OVERLAP` bytes, which are scanned again with the next chunk."""
    count, carry = 0, b""
    while chunk := handle.read(CHUNK_BYTES):
        data = carry + chunk
        cut = max(0, len(data) - _OVERLAP)
        count += sum(1 for m in _PAGE_OBJECT.finditer(data) if m.start() < cut)
        carry = data[cut:]
    return count + len(_PAGE_OBJECT.findall(carry))
