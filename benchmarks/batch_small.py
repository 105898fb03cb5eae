"""A small job through the Batch API, end to end: 5,000 rows, a provider batch that takes 2 s.

    python benchmarks/batch_small.py [rows] [batch_seconds]      # default 5000 2

Wall time of `batchor apply` (start-up, plan, upload, create, polls, download, output) against
a fake whose batches end at the first status read 2 s after their creation (target <= 4 s on a
quiet machine). The fake answers a batch's rows while it runs (`batch_answers_ahead`), as a
provider has its answers when a batch ends; without it the fake computed all 5,000 answers inside
the status read that ends the batch, which the client waited for. Also prints the polls made and
where the wall time went, from the run's events: until the batch was submitted (start-up, plan,
building and uploading the request file, create), waiting for it, collecting it (download, parse,
record), and the output and exit after it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import RESULTS, batchor, fake_server, fresh_dir, reviews_csv, write_spec


def run_batch_small(rows: int = 5000, batch_seconds: float = 2.0) -> dict[str, Any]:
    data = reviews_csv(rows)
    folder = fresh_dir(f"batch-small-{rows}")
    with fake_server(batch_polls=1, batch_seconds=batch_seconds, batch_answers_ahead=True) as server:
        spec = write_spec(folder, data, base_url=server.openai_base_url)
        document = yaml.safe_load(spec.read_text())
        document["limits"].update(mode="batch")  # default polling
        spec.write_text(yaml.safe_dump(document, sort_keys=False))
        started = time.time()
        measured = batchor(["apply", str(spec), "--yes", "--json"], cwd=folder).check()
        stats = server.stats()
    polls = [e for e in measured.events if e.get("event") == "batch_waiting"]
    return {
        "rows": rows,
        "batch_seconds": batch_seconds,
        "wall_s": round(measured.wall_s, 2),
        "cpu_s": round(measured.cpu_s, 2),
        "batches": stats["batches_created"],
        "polls": len(polls),
        "waits_s": [p.get("next_poll_s") for p in polls],
        "phases_s": phases(measured, started),
        "succeeded": measured.event("run_finished")["succeeded"],
    }


def phases(measured: Any, started: float) -> dict[str, float]:
    """Seconds from the process start to the submit, of waiting (to the last poll), collecting
    (to the batch's results stored), and after it (output, exit)."""
    first = {}
    for event in measured.events:
        first.setdefault(event["event"], event["at"] - started)
    last_wait = [e for e in measured.events if e.get("event") == "batch_waiting"][-1]
    seen = last_wait["at"] - started + last_wait["next_poll_s"]
    collected = measured.event("batch_collected")["at"] - started
    return {
        "to_submitted": round(first["batch_submitted"], 2),
        "waiting": round(seen - first["batch_submitted"], 2),
        "collecting": round(collected - seen, 2),
        "output_and_exit": round(measured.wall_s - collected, 2),
    }


if __name__ == "__main__":
    found = run_batch_small(
        *(int(sys.argv[1]),) if len(sys.argv) > 1 else (), *(float(sys.argv[2]),) if len(sys.argv) > 2 else ()
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "batch_small.json").write_text(json.dumps(found, indent=2) + "\n")
    print(json.dumps(found, indent=2))
