"""Local overhead of an image attachment per row: the same job with and without one distinct
JPEG (640x480) per row, realtime and batch, against the fake (which decodes every image).

    python benchmarks/attachments_overhead.py [rows]      # default 2,000

The difference of client CPU seconds (plan: read, hash, header; apply: load, check the hash,
base64, send) divided by the rows is the overhead per image row. End-to-end figures carry the
noise of a shared machine, so the attachment work is also timed alone, in process: describing
the row's file at plan time, and loading it plus building each provider's request body at apply.
"""

from __future__ import annotations

import csv
import io
import json
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import batchor, fake_server, fresh_dir, reviews_csv, write_spec


def _with_photos(data: Path, folder: Path) -> Path:
    """The reviews CSV plus a `photo` column: one distinct JPEG per row in `folder/photos`."""
    (folder / "photos").mkdir(parents=True, exist_ok=True)
    with data.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    for i, row in enumerate(rows):
        out = io.BytesIO()
        Image.new("RGB", (640, 480), (i % 256, (i // 256) % 256, 7)).save(out, format="JPEG")
        (folder / "photos" / f"{i}.jpg").write_bytes(out.getvalue())
        row["photo"] = f"photos/{i}.jpg"
    path = folder / "rows.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def _cpu(folder: Path, data: Path, base_url: str, attach: bool, mode: str) -> float:
    spec = write_spec(folder, data, base_url=base_url, mode=mode, batch_poll_s=0.05, batch_poll_max_s=0.05)
    document = yaml.safe_load(spec.read_text())
    if attach:
        document["steps"]["classify"]["attachments"] = ["row.photo"]
    spec.write_text(yaml.safe_dump(document, sort_keys=False))
    measured = batchor(["apply", str(spec), "--yes", "--json"], cwd=folder).check()
    return measured.cpu_s


def _in_process(folder: Path, rows: int) -> dict[str, float]:
    """CPU ms per image row of the attachment code alone (plan: describe; apply: load + body)."""
    from batchor.plan.attachments import AttachmentContext, describe_row, load
    from batchor.providers.anthropic import realtime as anthropic
    from batchor.providers.base import LLMRequest
    from batchor.providers.gemini import realtime as gemini
    from batchor.providers.openai import realtime as openai

    ctx = AttachmentContext(folder, "openai")
    started = time.process_time()
    refs = [describe_row([f"photos/{i}.jpg"], str(i), ctx) for i in range(rows)]
    planned = time.process_time()
    figures = {"plan_ms": (planned - started) / rows * 1000}
    for name, to_body in (("openai", openai.to_body), ("anthropic", anthropic.to_body), ("gemini", gemini.to_body)):
        started = time.process_time()
        for i, row in enumerate(refs):
            request = LLMRequest(
                str(i), "m", ({"role": "user", "content": "x"},), {"max_tokens": 5}, attachments=load(row)
            )
            json.dumps(to_body(request))
        figures[f"apply_{name}_ms"] = (time.process_time() - started) / rows * 1000
    return {k: round(v, 3) for k, v in figures.items()}


def run_attachments_overhead(rows: int = 2_000) -> dict[str, Any]:
    text = reviews_csv(rows)
    figures: dict[str, Any] = {"rows": rows}
    with fake_server(batch_polls=0) as server:
        for mode in ("realtime", "batch"):
            plain = _cpu(fresh_dir(f"attach-plain-{mode}"), text, server.openai_base_url, False, mode)
            folder = fresh_dir(f"attach-image-{mode}")
            images = _cpu(folder, _with_photos(text, folder), server.openai_base_url, True, mode)
            figures[mode] = {
                "cpu_s_text": round(plain, 2),
                "cpu_s_image": round(images, 2),
                "overhead_ms_per_image_row": round((images - plain) / rows * 1000, 3),
            }
        figures["images_received"] = len(server.stats()["media"])
    figures["in_process_per_image_row"] = _in_process(folder, rows)  # the last run's photos
    return figures


if __name__ == "__main__":
    print(json.dumps(run_attachments_overhead(int(sys.argv[1]) if len(sys.argv) > 1 else 2_000), indent=2))
