"""Attachment files at plan time are read a chunk at a time (type and size from the header, the
hash streamed), never whole; a PDF sent as its text (`pdf: text`) too big to parse is refused
from its size, with `attachment_too_large`, before it is read."""

from __future__ import annotations

import io
import os
import struct
import tracemalloc

from batchor.plan.attachments import AttachmentContext, describe_row, load
from batchor.plan.media_info import _count_page_objects, describe
from batchor.plan.pdf_text import MAX_BYTES
from tests.media_files import image_bytes, text_pdf_bytes, write

MB = 1 << 20


def _padded(path, data: bytes, size: int):
    """`data` followed by zeros up to `size` bytes (a sparse file: no disk, no memory)."""
    write(path, data)
    os.truncate(path, size)
    return path


def _peak_bytes(work) -> tuple[object, int]:
    tracemalloc.start()
    try:
        done = work()
        return done, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_an_attachment_is_hashed_a_chunk_at_a_time(tmp_path):
    big = _padded(tmp_path / "big.png", image_bytes(640, 480), 30 * MB)  # under OpenAI's 50 MB of base64
    (ref,), peak = _peak_bytes(lambda: describe_row([str(big)], "r1", AttachmentContext(tmp_path, "openai")))
    assert "error" not in ref and (ref["width"], ref["height"], ref["bytes"]) == (640, 480, 30 * MB)
    assert peak < 4 * MB, peak  # read whole, the file alone took 30 MB
    assert load([ref])[0].data == big.read_bytes()  # the hash is the whole file's: apply sends it


def test_a_jpeg_start_of_frame_far_from_the_start_is_found_by_seeking(tmp_path):
    jpeg = image_bytes(320, 200, "JPEG")
    filler = b"\xff\xe1" + struct.pack(">H", 60_000) + b"\0" * 59_998  # an APP1 (EXIF) segment
    data = jpeg[:2] + filler * 3 + jpeg[2:]  # the frame header 180 KB in, past the first read
    assert (describe(data).width, describe(data).height) == (320, 200)
    path = write(tmp_path / "exif.jpg", data)
    (ref,) = describe_row([str(path)], "r1", AttachmentContext(tmp_path, "anthropic"))
    assert (ref["width"], ref["height"]) == (320, 200)


def test_pdf_as_text_over_the_size_limit_is_refused_before_it_is_read(tmp_path):
    huge = _padded(tmp_path / "huge.pdf", text_pdf_bytes(["hello"]), MAX_BYTES + 1)
    ctx = AttachmentContext(tmp_path, "openai", pdf_text=True)
    (ref,), peak = _peak_bytes(lambda: describe_row([str(huge)], "r9", ctx))
    assert ref["error"] == "attachment_too_large", ref
    assert "row r9" in ref["detail"] and "pdf: native" in ref["detail"] and f"{MAX_BYTES:,}" in ref["detail"]
    assert peak < MB, peak
    small = write(tmp_path / "small.pdf", text_pdf_bytes(["hello there"]))
    (ok,) = describe_row([str(small)], "r1", ctx)
    assert ok["as"] == "text" and "hello there" in ok["text"]


def test_pdf_as_text_given_as_bytes_has_the_same_limit(tmp_path):
    data = text_pdf_bytes(["hello"]) + b"\0" * (MAX_BYTES + 1)
    (ref,) = describe_row([data], "r2", AttachmentContext(tmp_path, "gemini", pdf_text=True))
    assert ref["error"] == "attachment_too_large" and "pdf: native" in ref["detail"]


def test_page_objects_are_counted_across_chunk_boundaries():
    page = b"<< /Type /Page /Parent 2 0 R >>"
    data = b"%PDF-1.4\n" + b"x" * (MB - 14) + page + b"y" * (MB - 20) + page + b"\n/Type /Pages\n" + page
    assert _count_page_objects(io.BytesIO(data)) == 3  # the first straddles the first MB, /Pages is no page
