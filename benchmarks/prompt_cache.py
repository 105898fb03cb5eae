"""Prompt caching priced and planned: spend with and without the cache, and the plan after a pilot.

    python benchmarks/prompt_cache.py [--rows 1000] [--pilot 50] [--only anthropic] [--mode realtime]

A job with a ~2,000-token shared system prompt and short rows (one review each, a structured
answer), against the fake provider, which reports prompt-cache usage as each provider does
(tests/fakes/cache.py). For each provider (Anthropic claude-sonnet-4-5, OpenAI gpt-5-mini, Gemini
gemini-2.5-flash) and mode (realtime, batch): a pilot of N rows in that mode (batchor.pilot.run_pilot,
seed 0; `--pilot N --mode batch`), then the rest from the plan the pilot calibrated. Gemini also
runs in mode `explicit` (realtime, `cache: {explicit: true}`: the system prompt in a context
cache, its creation and storage in the ledger and the fake's bill) and `explicit-batch` (the same
in batch mode: the cache made before the first job, named by every line, deleted once collected). Per row of the table:
- uncached: what the whole job's tokens cost without the cache (the ledger's `uncached_usd`);
- cached: what it cost (the ledger: pilot + rest);
- expected: the pilot's spend + the plan's expected cost of the rest (cache reads and writes at
  the hit rates the pilot measured); actual: the pilot's spend + the rest's;
- bill: the fake's own bill of every answer, priced from genai-prices (tests/fakes/bill.py),
  which the ledger must equal.
Targets (issue 37): Anthropic realtime cached <= 0.2x uncached; |actual / expected - 1| <= 10 %
on every row; recorded spend equal to the fake's bill.

The fake counts OpenAI input tokens with o200k (`token_counter: o200k`) as batchor does, other
providers' as characters / 4 (which batchor's calibrated count follows after the pilot).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

from conftest import SENTIMENT_SCHEMA, write_csv  # noqa: E402

from batchor import operations  # noqa: E402
from batchor.api import apply_compiled  # noqa: E402
from batchor.pilot import run_pilot  # noqa: E402
from tests.fakes import FakeServer  # noqa: E402
from tests.fakes.bill import fake_bill  # noqa: E402

MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-5-mini", "gemini": "gemini-2.5-flash"}
BATCH = {"batch_poll_s": 0.01, "batch_poll_max_s": 0.05}
RULES = [
    "Read the whole review before deciding.",
    "Sarcasm counts as negative unless the reviewer clearly recommends the product.",
    "A review that praises one part and criticises another is mixed.",
    "Delivery problems alone do not make a review negative if the product is praised.",
    "Score 5 only for enthusiastic reviews; score 1 only for reviews that warn others away.",
]


def system_prompt(words: int = 1500) -> str:
    """About 2,000 tokens of instructions, the same for every row."""
    lines, n = ["You label customer reviews for a retailer's quality team."], 0
    while sum(len(line.split()) for line in lines) < words:
        lines.append(f"Guideline {n + 1}: {RULES[n % len(RULES)]} (case {n + 1} of the handbook)")
        n += 1
    return "\n".join(lines)


EXPLICIT = {"explicit": "realtime", "explicit-batch": "batch"}  # modes with a Gemini context cache: their API


def job(folder: Path, provider: str, mode: str, rows: int) -> Path:
    """The job's spec; mode `explicit` (`explicit-batch`): realtime (batch) with a Gemini explicit
    context cache (`cache: {explicit: true}`)."""
    write_csv(
        folder / "data.csv", [{"id": f"r{i}", "text": f"review {i}: arrived late, works fine"} for i in range(rows)]
    )
    spec: dict[str, Any] = {
        "version": 1,
        "name": f"cache-{provider}-{mode}",
        "input": {"path": "data.csv", "key": "id"},
        "model": {"provider": provider, "name": MODELS[provider], "params": {"temperature": 0, "max_tokens": 60}},
        "steps": {
            "label": {
                "system": system_prompt(),
                "prompt": "Label this review.\n\nReview: {{ row.text }}",
                "output": {"schema": SENTIMENT_SCHEMA},
            }
        },
        "output": {"path": "out/labels.csv"},
        "limits": {
            "concurrency": 8,
            "mode": EXPLICIT.get(mode, mode),
            "request_timeout_s": 30,
            **(BATCH if EXPLICIT.get(mode, mode) == "batch" else {}),
        },
        # the plain modes measure the implicit cache (unset, a Gemini batch step may take a context cache)
        "cache": {"explicit": mode in EXPLICIT},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def measure(fake: FakeServer, provider: str, mode: str, rows: int, pilot: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix=f"batchor-cache-{provider}-{mode}-"))
    os.chdir(folder)
    fake.reset(config=True)
    fake.configure(token_counter="o200k" if provider == "openai" else "chars/4")
    spec = job(folder, provider, mode, rows)
    pilot_mode = EXPLICIT.get(mode, mode)  # a batch job's pilot runs in batch
    piloted = run_pilot(spec, pilot, seed=0, mode=pilot_mode, handle_signals=False)
    rest_expected = piloted.plan.header.totals.cost_expected
    rest = apply_compiled(piloted.plan, handle_signals=False)
    runs = [r for r in operations.runs(limit=10) if r["run_id"] in (*piloted.run_ids, rest.run_id)]
    cached = sum(r["spend"]["total_usd"] for r in runs)
    uncached = cached + sum(r["spend"]["cache_saved_usd"] for r in runs)
    expected, bill = piloted.cost_usd + rest_expected, fake_bill(fake.stats())
    return {
        "provider": provider,
        "mode": mode,
        "rows": rows,
        "pilot": pilot,
        "uncached": round(uncached, 6),
        "cached": round(cached, 6),
        "cached_over_uncached": round(cached / uncached, 4),
        "expected": round(expected, 6),
        "actual": round(cached, 6),
        "actual_over_expected": round(cached / expected, 4),
        "upper": round(piloted.cost_usd + piloted.plan.header.totals.cost_upper, 6),
        "fake_bill": round(bill, 6),
        # a context cache's storage is billed by the second until its delete call, which the ledger's
        # clock and the fake's see a few seconds apart ($0.0000000006 a second for this prompt)
        "ledger_equals_bill": abs(cached - bill) <= (1e-8 if mode in EXPLICIT else 1e-9 * max(1.0, bill)),
        "cache_source": piloted.plan.header.steps[0].prompt_cache.source,  # type: ignore[union-attr]
    }


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| provider | mode | uncached | cached | cached/uncached | expected | actual | actual/expected | = fake bill |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['provider']} | {r['mode']} | ${r['uncached']:.4f} | ${r['cached']:.4f} | "
            f"{r['cached_over_uncached']:.3f} | ${r['expected']:.4f} | ${r['actual']:.4f} | "
            f"{r['actual_over_expected']:.3f} | {'yes' if r['ledger_equals_bill'] else 'NO'} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--pilot", type=int, default=50)
    parser.add_argument("--only", action="append", choices=sorted(MODELS))
    parser.add_argument("--mode", action="append", choices=["realtime", "batch", "explicit", "explicit-batch"])
    args = parser.parse_args()
    results = []
    with FakeServer.start({}) as fake:
        os.environ.update(
            OPENAI_API_KEY="sk-bench-123456",
            OPENAI_BASE_URL=fake.openai_base_url,
            ANTHROPIC_API_KEY="sk-ant-bench-123456",
            ANTHROPIC_BASE_URL=fake.anthropic_base_url,
            GEMINI_API_KEY="gemini-bench-123456",
            GOOGLE_GEMINI_BASE_URL=fake.gemini_base_url,
        )
        os.environ.pop("BATCHOR_STATE", None)
        for provider in args.only or sorted(MODELS):
            gemini = ["explicit", "explicit-batch"] if provider == "gemini" else []
            for mode in args.mode or ["realtime", "batch", *gemini]:
                if mode in EXPLICIT and provider != "gemini":
                    continue
                result = measure(fake, provider, mode, args.rows, args.pilot)
                print(json.dumps(result), flush=True)
                results.append(result)
    print(table(results))


if __name__ == "__main__":
    main()
