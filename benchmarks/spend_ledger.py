"""Recorded spend vs what the provider billed, and how far a budget is passed, when most answers
are invalid (the fake answers malformed JSON / schema mismatches at `--malformed`).

    python benchmarks/spend_ledger.py [rows] [malformed]      # default 300 rows, 0.85

Prints JSON: per mode (realtime, batch) the recorded spend (sum of attempts in the state), the
fake's billed tokens x price, and their difference; then a realtime run capped at half of the
uncapped spend (or the plan's one-attempt bound, if higher):
the cap, the spend recorded and billed, and the overshoot (spend - cap).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import duckdb
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from conftest import make_spec  # noqa: E402

from batchor import api  # noqa: E402
from batchor.plan.prices import ModelPrice  # noqa: E402
from tests.fakes import FakeServer  # noqa: E402

FAST_BATCH = {"mode": "batch", "batch_poll_s": 0.01, "batch_poll_max_s": 0.05}


def _spec(folder: Path, rows: int, **limits: Any) -> Path:
    spec = make_spec(
        folder, rows=rows, limits={"concurrency": 16, "max_attempts": 10, "request_timeout_s": 10, **limits}
    )
    data = yaml.safe_load(spec.read_text())
    data["model"]["params"]["max_tokens"] = 20  # a worst case close to the real cost of an answer
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    return spec


def _run(fake: FakeServer, rows: int, malformed: float, batch: bool, max_cost: float | None = None) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="batchor-spend-"))
    os.chdir(folder)
    fake.reset(config=True)
    fake.configure(malformed=malformed, seed=7)
    spec = _spec(folder, rows, **(FAST_BATCH if batch else {}))
    result = api.apply(spec, handle_signals=False, max_cost=max_cost)
    header = api.plan(spec, save=False).header
    price = ModelPrice.from_dict(header.steps[0].price or {})
    stats = fake.stats()
    billed = price.cost(stats["input_tokens"], stats["output_tokens"], batch=batch)
    with duckdb.connect(str(folder / ".batchor" / "state.duckdb"), read_only=True) as db:
        recorded, attempts = db.execute(
            "SELECT sum(cost_usd), count(*) FILTER (WHERE cost_usd > 0) FROM attempts"
        ).fetchall()[0]
    return {
        "mode": "batch" if batch else "realtime",
        "status": result.status,
        "succeeded": result.succeeded,
        "failed": result.failed,
        "billed_attempts": attempts,
        "answers_at_fake": stats["answered"],
        "recorded_usd": recorded,
        "billed_usd": billed,
        "difference_usd": recorded - billed,
        "wasted_usd": result.wasted_usd,
        "max_cost": max_cost,
        "plan_upper_usd": header.totals.cost_upper,
    }


def main(rows: int = 300, malformed: float = 0.85) -> dict[str, Any]:
    with FakeServer.start({}) as fake:
        os.environ.update(OPENAI_API_KEY="sk-bench-key-123456", OPENAI_BASE_URL=fake.openai_base_url)
        runs = [_run(fake, rows, malformed, batch) for batch in (False, True)]
        cap = max(runs[0]["recorded_usd"] / 2, runs[0]["plan_upper_usd"])  # a lower cap is refused up front
        capped = _run(fake, rows, malformed, False, max_cost=cap)
        capped["overshoot_usd"] = capped["recorded_usd"] - cap
    return {"rows": rows, "malformed": malformed, "runs": runs, "capped": capped}


if __name__ == "__main__":
    args = sys.argv[1:]
    print(json.dumps(main(int(args[0]) if args else 300, float(args[1]) if len(args) > 1 else 0.85), indent=2))
