"""Small real media files for attachment tests: images drawn with Pillow, PDFs written by pypdf."""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image
from pypdf import PdfWriter


def image_bytes(width: int, height: int, fmt: str = "PNG", colour: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(out, format=fmt)
    return out.getvalue()


def pdf_bytes(pages: int = 2) -> bytes:
    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(width=612, height=792)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path
