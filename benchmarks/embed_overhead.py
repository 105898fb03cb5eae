"""Local overhead of an embedding step per row, against the fake (in its own process).

    python benchmarks/embed_overhead.py [rows]      # default 5,000

Each row's review is embedded (text-embedding-3-small, 256 dimensions) realtime and in OpenAI's
Batch API. Client CPU seconds of `batchor apply` (plan included) divided by the rows is the
local cost per embedded row; the same rows through a plain text LLM step (one call per row) are
the yardstick. The fake's counters give the calls made (texts per call).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import batchor, fake_server, fresh_dir, reviews_csv, write_spec

EMBED = {"embed": "{{ row.text }}", "model": {"name": "text-embedding-3-small"}, "dimensions": 256}
TEXT = {"prompt": "Summarise in five words: {{ row.text }}"}


def _apply(name: str, data: Path, base_url: str, step: dict[str, Any], mode: str) -> dict[str, Any]:
    folder = fresh_dir(name)
    spec = write_spec(folder, data, base_url=base_url, mode=mode, batch_poll_s=0.05, batch_poll_max_s=0.05)
    document = yaml.safe_load(spec.read_text())
    document["steps"] = {"step": step}
    document["state"] = str(folder / "state.duckdb")  # its own: nothing cached from another run
    spec.write_text(yaml.safe_dump(document, sort_keys=False))
    measured = batchor(["apply", str(spec), "--yes", "--json"], cwd=folder).check()
    return {"cpu_s": round(measured.cpu_s, 2), "wall_s": round(measured.wall_s, 2)}


def run_embed_overhead(rows: int = 5_000) -> dict[str, Any]:
    data = reviews_csv(rows)
    figures: dict[str, Any] = {"rows": rows}
    with fake_server(batch_polls=0) as server:
        for mode in ("realtime", "batch"):
            server.reset()
            run = _apply(f"embed-{mode}", data, server.openai_base_url, EMBED, mode)
            stats = server.stats()
            calls = stats["embed_calls"]
            run.update(
                embeddings_calls=len(calls) if mode == "realtime" else 0,
                batches=stats["batches_created"],
                texts=sum(calls),
                cpu_ms_per_row=round(run["cpu_s"] / rows * 1000, 3),
            )
            figures[f"embed_{mode}"] = run
        server.reset()
        text = _apply("embed-yardstick", data, server.openai_base_url, TEXT, "realtime")
        text.update(calls=server.stats()["requests"], cpu_ms_per_row=round(text["cpu_s"] / rows * 1000, 3))
        figures["text_step_realtime"] = text
    return figures


if __name__ == "__main__":
    print(json.dumps(run_embed_overhead(int(sys.argv[1]) if len(sys.argv) > 1 else 5_000), indent=2))
