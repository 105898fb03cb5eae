"""Local overhead of batch mode per row: plan + chunking + JSONL encoding + upload + result
download + validation + state writes, against a fake whose batches finish at once.

    python benchmarks/batch_overhead.py [rows]      # default 100,000

`run_batch_overhead(rows)` is what benchmarks/run.py can import. The fake runs in its own
process, so the figures are the client's: CPU seconds and wall seconds of `batchor apply`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import batchor, count_rows, fake_server, fresh_dir, reviews_csv, write_spec


def run_batch_overhead(rows: int = 100_000) -> dict[str, Any]:
    """Apply a `rows`-row job in batch mode; returns wall/CPU seconds in total and per row."""
    data = reviews_csv(rows)
    folder = fresh_dir(f"batch-overhead-{rows}")
    with fake_server(batch_polls=0) as server:  # every batch is finished when created
        spec = write_spec(folder, data, base_url=server.openai_base_url)
        document = yaml.safe_load(spec.read_text())
        document["limits"].update(mode="batch", batch_poll_s=0.05, batch_poll_max_s=0.05)
        spec.write_text(yaml.safe_dump(document, sort_keys=False))
        measured = batchor(["apply", str(spec), "--yes", "--json"], cwd=folder).check()
        stats = server.stats()
        fake_cpu = _cpu_seconds(server.process.pid)
    answered = count_rows(folder / ".batchor" / "state.duckdb", "results")
    return {
        "rows": rows,
        "answered": answered,
        "batches": stats["batches_created"],
        "duplicated_rows": len(stats["batch_rows_duplicated"]),
        "wall_s": round(measured.wall_s, 2),
        "cpu_s": round(measured.cpu_s, 2),
        "max_rss_mb": round(measured.max_rss_mb, 1),
        "fake_cpu_s": round(fake_cpu, 2),  # the fake answering every row: most of the wall time
        "wall_us_per_row": round(measured.wall_s / rows * 1e6, 1),
        "cpu_us_per_row": round(measured.cpu_s / rows * 1e6, 1),
    }


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of `pid` (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    print(json.dumps(run_batch_overhead(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000), indent=2))
