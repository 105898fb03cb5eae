"""Peak memory of `batchor plan` over big attachment files: read a chunk at a time, never whole.

    python benchmarks/attachment_memory.py [rows] [mb] [pdf_mb]   # default: 8 rows, 30 MB, 3,072 MB

Case 1: `rows` rows, each with its own image of `mb` MB (under OpenAI's 50 MB of base64 per
request, so the plan must describe and hash it). Case 2: one row whose PDF, sent as its text
(`pdf: text`), is 3 GB (`pdf_mb`): refused from its size with `attachment_too_large`. The files are sparse
(a real header, then zeros), so they cost no disk. Each plan runs as a subprocess of its own;
the figure is its peak RSS (ru_maxrss). Run the same script from an older checkout to compare.
"""

from __future__ import annotations

import csv
import io
import os
import sys
from pathlib import Path

import yaml
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import batchor, fresh_dir

MB = 1 << 20


def _sparse(path: Path, head: bytes, size: int) -> str:
    path.write_bytes(head)
    os.truncate(path, size)
    return path.name


def _image(i: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 64), (i % 256, 40, 90)).save(out, format="PNG")
    return out.getvalue()


def _pdf() -> bytes:
    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(width=612, height=792)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _plan(folder: Path, files: list[str], pdf_text: bool) -> tuple[float, str]:
    with (folder / "rows.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "file"])
        writer.writerows([[f"r{i}", name] for i, name in enumerate(files)])
    step = {"prompt": "Describe the file.", "output": "text", "attachments": ["row.file"]}
    if pdf_text:
        step["pdf"] = "text"
    spec = {
        "version": 1,
        "name": folder.name,
        "input": {"path": "rows.csv", "key": "id"},
        "model": {"provider": "openai", "name": "gpt-4.1-mini", "params": {"max_tokens": 20}},
        "steps": {"look": step},
        "output": {"path": "out.csv"},
    }
    (folder / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    measured = batchor(["plan", "spec.yaml"], cwd=folder).check()
    note = next((line for line in measured.stdout.splitlines() if "cannot be sent" in line), "")
    return measured.max_rss_mb, note.split("): ", 1)[-1][:90] or "none"


def main() -> None:
    numbers = [int(a) for a in sys.argv[1:] if a.isdigit()]
    rows, size_mb, pdf_mb = (numbers + [8, 30, 3072][len(numbers) :])[:3]
    images = fresh_dir("attachment-memory-images")
    names = [_sparse(images / f"{i}.png", _image(i), size_mb * MB) for i in range(rows)]
    rss, _ = _plan(images, names, pdf_text=False)
    print(f"plan, {rows} rows x {size_mb} MB image each: peak RSS {rss:6.0f} MB", flush=True)
    pdfs = fresh_dir("attachment-memory-pdf")
    rss, problem = _plan(pdfs, [_sparse(pdfs / "huge.pdf", _pdf(), pdf_mb * MB)], pdf_text=True)
    print(f"plan, 1 row x {pdf_mb:,} MB PDF with `pdf: text`: peak RSS {rss:6.0f} MB; row's problem: {problem}")


if __name__ == "__main__":
    main()
