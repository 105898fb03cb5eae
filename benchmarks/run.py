"""Run the batchor benchmarks and print a table; results go to benchmarks/results/latest.json.

    python benchmarks/run.py                 # full sizes (1M-row plan and re-apply: minutes)
    python benchmarks/run.py --quick         # smaller sizes, under a minute
    python benchmarks/run.py --only plan     # one scenario; repeat --only for more

Input data is generated once and cached under benchmarks/.work/. Timings on a shared machine are
noisy: compare figures from one run, and repeat the ones that matter.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import RESULTS
from scenarios import SCENARIOS, Outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (under a minute)")
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted(SCENARIOS),
        metavar="NAME",
        help=f"run only this scenario ({', '.join(SCENARIOS)}); repeatable",
    )
    args = parser.parse_args(argv)
    names = args.only or list(SCENARIOS)
    started = time.perf_counter()
    outcomes = [_run_one(name, args.quick) for name in names]
    elapsed = time.perf_counter() - started
    print(render_table(outcomes))
    path = write_results(outcomes, quick=args.quick, elapsed=elapsed)
    print(f"\n{'quick' if args.quick else 'full'} run took {elapsed:.1f}s; results written to {path}")
    failed = [f"{o.scenario}: {f.metric}" for o in outcomes for f in o.figures if f.ok is False]
    if failed:
        print("targets missed: " + "; ".join(failed))
    return 1 if any(o.notes and o.notes[0].startswith("error") for o in outcomes) else 0


def _run_one(name: str, quick: bool) -> Outcome:
    print(f"running {name}...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    try:
        outcome = SCENARIOS[name](quick)
    except Exception as exc:  # noqa: BLE001 - one broken scenario must not hide the others
        traceback.print_exc()
        outcome = Outcome(name, 0, notes=[f"error: {exc.__class__.__name__}: {str(exc)[:300]}"])
    print(f"  {name} done in {time.perf_counter() - t0:.1f}s", file=sys.stderr, flush=True)
    return outcome


def render_table(outcomes: list[Outcome]) -> str:
    rows = [("scenario", "rows", "metric", "value", "target", "ok")]
    for o in outcomes:
        for f in o.figures:
            value = "-" if f.value is None else (f"{f.value:,}" if isinstance(f.value, (int, float)) else f.value)
            ok = {True: "yes", False: "NO", None: ""}[f.ok]
            rows.append(
                (
                    o.scenario,
                    f"{o.size:,}",
                    f.metric,
                    f"{value} {f.unit}".strip(),
                    f.target or "",
                    ok,
                )
            )
        for note in o.notes:
            rows.append(
                (
                    o.scenario,
                    f"{o.size:,}" if o.size else "",
                    "note",
                    note.splitlines()[0][:100],
                    "",
                    "",
                )
            )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_results(outcomes: list[Outcome], *, quick: bool, elapsed: float) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    document = {
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "mode": "quick" if quick else "full",
        "elapsed_s": round(elapsed, 1),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "scenarios": [
            {
                "name": o.scenario,
                "rows": o.size,
                "notes": o.notes,
                "figures": [
                    {
                        "metric": f.metric,
                        "value": f.value,
                        "unit": f.unit,
                        "target": f.target,
                        "ok": f.ok,
                    }
                    for f in o.figures
                ],
            }
            for o in outcomes
        ],
    }
    path = RESULTS / "latest.json"
    text = json.dumps(document, indent=2)
    path.write_text(text)
    (RESULTS / f"latest-{document['mode']}.json").write_text(text)
    return path


if __name__ == "__main__":
    sys.exit(main())
