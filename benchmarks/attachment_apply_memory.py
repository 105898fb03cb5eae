"""Peak memory of `batchor apply` over big attachments: what is in flight, not the whole job.

    python benchmarks/attachment_apply_memory.py [rows] [mb] [concurrency] [realtime|batch]
    # default: 24 rows, 20 MB, concurrency 2, both modes

Each of `rows` rows attaches its own image of `mb` MB (sparse: a real PNG header, then zeros, so
it costs no disk). The job is planned, then applied against the fake OpenAI server in a process of
its own, in realtime with `concurrency` requests at a time and in batch mode; each `apply` runs as
a subprocess and the figure is its peak RSS (ru_maxrss). Memory bounded by what is in flight stays
about the same whatever `rows` is; run it with two row counts to see which it is.
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

from harness import batchor, fake_server, fresh_dir

MB = 1 << 20


def _image_file(path: Path, i: int, size: int) -> str:
    out = io.BytesIO()
    Image.new("RGB", (64, 64), (i % 256, 40, 90)).save(out, format="PNG")
    path.write_bytes(out.getvalue())
    os.truncate(path, size)
    return path.name


def _spec(folder: Path, rows: int, size_mb: int, base_url: str, mode: str, concurrency: int) -> None:
    names = [_image_file(folder / f"{i}.png", i, size_mb * MB) for i in range(rows)]
    with (folder / "rows.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "file"])
        writer.writerows([[f"r{i}", name] for i, name in enumerate(names)])
    spec = {
        "version": 1,
        "name": folder.name,
        "input": {"path": "rows.csv", "key": "id"},
        "model": {"provider": "openai", "name": "gpt-4.1-mini", "base_url": base_url, "params": {"max_tokens": 20}},
        "steps": {"look": {"prompt": "Describe the file.", "output": "text", "attachments": ["row.file"]}},
        "output": {"path": "out.csv"},
        "limits": {"mode": mode, "concurrency": concurrency, "batch_poll_s": 0.05, "batch_poll_max_s": 0.05},
    }
    (folder / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")


def main() -> None:
    numbers = [int(a) for a in sys.argv[1:] if a.isdigit()]
    rows, size_mb, concurrency = (numbers + [24, 20, 2][len(numbers) :])[:3]
    with fake_server(batch_polls=0) as server:
        for mode in [m for m in ("realtime", "batch") if m in sys.argv] or ["realtime", "batch"]:
            folder = fresh_dir(f"attachment-apply-{mode}")
            _spec(folder, rows, size_mb, server.openai_base_url, mode, concurrency)
            planned = batchor(["plan", "spec.yaml", "--out", "job.plan"], cwd=folder).check()
            applied = batchor(["apply", "job.plan", "--yes"], cwd=folder).check()
            print(
                f"{mode:8} {rows} rows x {size_mb} MB image, concurrency {concurrency}: "
                f"plan peak RSS {planned.max_rss_mb:5.0f} MB, apply peak RSS {applied.max_rss_mb:5.0f} MB "
                f"({applied.wall_s:.1f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
