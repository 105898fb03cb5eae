"""`batchor compare` on three models of different prices and quality: does it pick the cheapest
model passing every check, and how close is each model's projected full-job cost to a full run?

    python benchmarks/compare_models.py [--rows 600] [--sample 50] [--seed 0]

Against the fake provider (tests/fakes/) told to answer per model (`model_accuracy`: the share of
rows whose `[truth: x]` label a model gets right; `model_latency_ms`): gpt-4.1-nano (60 %),
gpt-4.1-mini (93 %) and gpt-4.1 (99 %), priced as OpenAI prices them. The spec labels reviews of
log-normal lengths (a sentiment enum with golden labels, a free-text reason of log-normal length)
and gates on `classify.sentiment.accuracy >= 0.85`. `batchor.compare` runs a seeded sample of
`--sample` rows on each model (its projected full-job cost is the pilot estimator's); then each model
runs the whole job for real in a state of its own (nothing cached): its actual cost. Prints the
compare table, then one JSON line per model: projected, interval, actual, projected / actual, and
the verdict.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from conftest import make_spec, point_sdks_at, write_csv  # noqa: E402

from batchor import api, choose  # noqa: E402
from tests.fakes import FakeServer  # noqa: E402

MODELS = {"openai:gpt-4.1-nano": 0.60, "openai:gpt-4.1-mini": 0.93, "openai:gpt-4.1": 0.99}
LATENCY_MS = {"gpt-4.1-nano": 5, "gpt-4.1-mini": 15, "gpt-4.1": 40}
LABELS = ("positive", "negative", "mixed")
WORDS = [
    "the",
    "chair",
    "arrived",
    "late",
    "but",
    "the",
    "fabric",
    "feels",
    "solid",
    "and",
    "the",
    "legs",
    "wobble",
    "a",
    "little",
    "when",
    "you",
    "sit",
]
SCHEMA = {
    "type": "object",
    "properties": {
        "sentiment": {"type": "string", "enum": list(LABELS)},
        "reason": {"type": "string", "description": "one sentence"},
    },
    "required": ["sentiment", "reason"],
    "additionalProperties": False,
}


def write_job(folder: Path, rows: int, seed: int) -> Path:
    """Reviews of log-normal length (median 40 words), each with its true label in the text."""
    rng = random.Random(seed)
    data = []
    for i in range(rows):
        words = max(3, round(40 * math.exp(0.5 * rng.gauss(0, 1))))
        label = LABELS[rng.randrange(3)]
        text = " ".join(rng.choice(WORDS) for _ in range(words))
        data.append({"id": f"r{i}", "text": f"{text} [truth: {label}]", "label": label})
    spec = make_spec(
        folder,
        steps={
            "classify": {
                "system": "Classify the review's sentiment and give the reason in one sentence.",
                "prompt": "Review: {{ row.text }}",
                "output": {"schema": SCHEMA},
                "expected": {"sentiment": "label"},
                "checks": [{"metric": "classify.sentiment.accuracy", "min": 0.85}],
            }
        },
        limits={"concurrency": 16, "max_attempts": 3, "request_timeout_s": 30},
    )
    write_csv(folder / "data.csv", data)
    return spec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=600)
    parser.add_argument("--sample", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    config = {
        "model_accuracy": {m.split(":")[1]: a for m, a in MODELS.items()},
        "model_latency_ms": LATENCY_MS,
        "string_words": [12, 0.5],
    }
    with FakeServer.start(config) as server, tempfile.TemporaryDirectory() as tmp:
        import pytest

        with pytest.MonkeyPatch.context() as patch:
            point_sdks_at(server, patch)
            folder = Path(tmp)
            patch.chdir(folder)
            spec = write_job(folder, args.rows, args.seed)
            found = choose.compare(spec, list(MODELS), args.sample, seed=args.seed, max_cost=5)
            print(found)
            for r in found.results:
                full = api.apply(
                    spec, model=r.model, state=str(folder / f"full-{r.model.split(':')[1]}.duckdb"), max_cost=5
                )
                print(
                    json.dumps(
                        {
                            "model": r.model,
                            "rows": args.rows,
                            "sample": args.sample,
                            "passed": r.passed,
                            "accuracy_sample": round(r.metrics.get("classify.sentiment.accuracy", float("nan")), 3),
                            "projected_usd": round(r.projected, 6),
                            "interval_usd": [round(r.projected_low, 6), round(r.projected_high, 6)],
                            "actual_usd": round(full.cost_usd, 6),
                            "projected_over_actual": round(r.projected / full.cost_usd, 4),
                            "in_interval": r.projected_low <= full.cost_usd <= r.projected_high,
                        }
                    )
                )
            best = found.cheapest_passing
            print(json.dumps({"verdict": best.model if best else None, "compare_spent_usd": round(found.spent, 6)}))


if __name__ == "__main__":
    main()
