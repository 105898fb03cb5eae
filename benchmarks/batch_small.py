"""A small job through the Batch API, end to end: 5,000 rows, a provider batch that takes 2 s.

    python benchmarks/batch_small.py [rows] [batch_seconds]      # default 5000 2

Wall time of `batchor apply` (start-up, plan, upload, create, polls, download, output) against
a fake whose batches end at the first status read 2 s after their creation (target <= 4 s on a
quiet machine). Also prints the polls made and the time the batch was done before it was seen.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import RESULTS, batchor, fake_server, fresh_dir, reviews_csv, write_spec


def run_batch_small(rows: int = 5000, batch_seconds: float = 2.0) -> dict[str, Any]:
    data = reviews_csv(rows)
    folder = fresh_dir(f"batch-small-{rows}")
    with fake_server(batch_polls=1, batch_seconds=batch_seconds) as server:
        spec = write_spec(folder, data, base_url=server.openai_base_url)
        document = yaml.safe_load(spec.read_text())
        document["limits"].update(mode="batch")  # default polling
        spec.write_text(yaml.safe_dump(document, sort_keys=False))
        measured = batchor(["apply", str(spec), "--yes", "--json"], cwd=folder).check()
        stats = server.stats()
    polls = [e for e in measured.events if e.get("event") == "batch_waiting"]
    return {"rows": rows, "batch_seconds": batch_seconds, "wall_s": round(measured.wall_s, 2),
            "cpu_s": round(measured.cpu_s, 2), "batches": stats["batches_created"],
            "polls": len(polls), "waits_s": [p.get("next_poll_s") for p in polls],
            "succeeded": measured.event("run_finished")["succeeded"]}


if __name__ == "__main__":
    found = run_batch_small(*(int(sys.argv[1]),) if len(sys.argv) > 1 else (),
                            *(float(sys.argv[2]),) if len(sys.argv) > 2 else ())
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "batch_small.json").write_text(json.dumps(found, indent=2) + "\n")
    print(json.dumps(found, indent=2))
