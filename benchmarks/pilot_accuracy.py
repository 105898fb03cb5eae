"""How close the plan is after a pilot: expected cost (and its 90 % interval) vs what the run spent.

    python benchmarks/pilot_accuracy.py [rows] [pilot] [sigma] [seed]   # default 400 rows, pilot 50, sigma 0.6

For each spec (the example reviews spec; long free-text answers; a pipeline with `when:`), against
the fake provider answering text with log-normal lengths (median 120 words, sigma 0.6) and
structured answers from their schema: a pilot of N rows (batchor.pilot.run_pilot), then the full
apply. `seed` is the pilot's sample seed (default: the spec's, 0): the fake's answers depend only on
the prompt, so another seed draws other pilot rows, another measurement. Prints a JSON line per
spec: the plan's expected cost after the pilot, its interval, the
plan's upper bound, what the full run spent (recorded attempts), actual/expected, whether the
actual lies in the interval, the pilot's calls against N x steps (a `when:` step's top-up adds
calls: `top_up_rows`), and the pilot's local overhead (its wall time minus its runs' own durations:
planning the sample and the top-up's bound, re-planning, the interval).

The models are Anthropic and Gemini ones: the fake counts input tokens as characters / 4, which
only a non-OpenAI model's calibrated input count (plan/estimate.py) follows; an OpenAI model's
exact o200k count would differ from the fake's bill for reasons no pilot could fix.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from conftest import make_spec, write_csv  # noqa: E402

from batchor import api  # noqa: E402
from batchor.pilot import run_pilot  # noqa: E402
from tests.fakes import FakeServer  # noqa: E402

MEDIAN_WORDS = 120  # text answers: median length in words (log-normal, sigma from the command line)


def reviews(folder: Path, rows: int) -> Path:
    """The committed reviews example on its own data (sampled to `rows`), on Claude."""
    shutil.copytree(ROOT / "examples" / "data", folder / "examples" / "data")
    shutil.copytree(ROOT / "schemas", folder / "schemas")
    (folder / "specs").mkdir()
    spec = yaml.safe_load((ROOT / "specs" / "reviews.yaml").read_text())
    spec["model"] = {**spec["model"], "provider": "anthropic", "name": "claude-haiku-4-5"}
    spec["input"] = {**spec["input"], "limit": rows}
    path = folder / "specs" / "reviews.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def long_text(folder: Path, rows: int) -> Path:
    """Free-text summaries: answer lengths spread widely (the fake's log-normal replies)."""
    path = make_spec(folder, rows=rows, provider="gemini", model="gemini-2.5-flash", schema=None)
    spec = yaml.safe_load(path.read_text())
    spec["model"]["params"]["max_tokens"] = 2000
    spec["steps"] = {"summary": {"system": "Summarise the review for a support agent.",
                                 "prompt": "Review: {{ row.text }}", "output": "text"}}
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def pipeline(folder: Path, rows: int) -> Path:
    """Classify every ticket, then draft a long reply only where `when:` holds (about 30 %)."""
    write_csv(folder / "data.csv", [{"id": f"t{i}", "text": f"ticket {i} about order {i * 7919 % 10007}"}
                                    for i in range(rows)])
    spec = {
        "version": 1, "name": "tickets", "input": {"path": "data.csv", "key": "id"},
        "model": {"provider": "anthropic", "name": "claude-haiku-4-5", "params": {"max_tokens": 1500}},
        "steps": {
            "triage": {"prompt": "Classify: {{ row.text }}",
                       "output": {"schema": {"type": "object", "additionalProperties": False,
                                             "required": ["urgent", "topic"],
                                             "properties": {"urgent": {"type": "boolean"},
                                                            "topic": {"type": "string", "maxLength": 40}}}}},
            "reply": {"prompt": "Draft a reply to: {{ row.text }} ({{ triage.topic }})",
                      "when": "row.id[-1] in '147'"},
        },
        "output": {"path": "out/tickets.csv"}, "limits": {"concurrency": 16},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def measure(make: Any, rows: int, pilot_rows: int, sigma: float, fake: FakeServer,
            seed: int | None = None) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="pilot-bench-"))
    os.chdir(folder)
    spec = make(folder, rows)
    fake.reset(config=True)
    fake.configure(text_words=[MEDIAN_WORDS, sigma])
    started = time.perf_counter()
    piloted = run_pilot(spec, pilot_rows, seed=seed, handle_signals=False)
    elapsed = time.perf_counter() - started
    run_s = piloted.duration_s
    full, calibration = piloted.plan, piloted.calibration
    pilot_calls = fake.stats()["answered"]
    run = api.apply_compiled(full, handle_signals=False)
    steps = sum(1 for s in full.header.steps if s.provider != "sql")
    actual = run.cost_usd
    return {"spec": make.__name__, "rows": full.header.totals.rows, "pilot": pilot_rows, "sigma": sigma, "seed": seed,
            "expected": round(calibration.expected, 6),
            "interval_90": [round(calibration.low, 6), round(calibration.high, 6)],
            "upper": round(full.header.totals.cost_upper, 6), "actual": round(actual, 6),
            "ratio": round(actual / calibration.expected, 4) if calibration.expected else None,
            "in_interval": calibration.low <= actual <= calibration.high,
            # the whole job (the pilot's spend is known once it ran): (pilot + rest) / (pilot + expected rest)
            "job_ratio": round((piloted.cost_usd + actual) / (piloted.cost_usd + calibration.expected), 4),
            "pilot_cost": round(piloted.cost_usd, 6), "pilot_calls": pilot_calls,
            "pilot_call_bound": pilot_rows * steps, "top_up_rows": [t.rows for t in piloted.top_ups],
            "answers": {s.step: s.measured.answers for s in calibration.steps},
            "pilot_overhead_s": round(elapsed - run_s, 2),
            "pilot_run_s": round(run_s, 2),
            "sources": {s.step: s.source for s in calibration.steps}}


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    pilot_rows = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    sigma = float(sys.argv[3]) if len(sys.argv) > 3 else 0.6
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else None
    with FakeServer.start({}) as fake:
        os.environ.update(ANTHROPIC_API_KEY="sk-ant-bench-123456", ANTHROPIC_BASE_URL=fake.anthropic_base_url,
                          GEMINI_API_KEY="gemini-bench-123456", GOOGLE_GEMINI_BASE_URL=fake.gemini_base_url)
        for make in (reviews, long_text, pipeline):
            print(json.dumps(measure(make, rows, pilot_rows, sigma, fake, seed)), flush=True)


if __name__ == "__main__":
    main()
