"""Throughput of 1, 2 and 4 `batchor apply` workers on one run, sharing PostgreSQL state.

    python benchmarks/workers.py                          # rpm 6000, latency 100 ms, 2,000 rows
    python benchmarks/workers.py --workers 1 2 4 --rows 3000 --concurrency 8 --rpm 6000 --latency-ms 100

A fake provider (own process) answers after `--latency-ms` and refuses above `--rpm` with 429s;
the spec carries the same rpm, which the workers share. Each worker runs `--concurrency` requests
at once, so one worker alone is bound by latency (concurrency / latency) and several by the
shared limit. PostgreSQL: $BATCHOR_TEST_PG_URL, or a throwaway cluster (tests/pg_server.py).
Figures: wall time from the first worker's start to the last one's exit (start-up included),
and the steady rate at the provider between 25 % and 75 % of the rows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import RESULTS, ROOT, fake_server, fresh_dir, reviews_csv, write_spec

from tests.pg_server import create_database, server


def run_workers(n: int, *, folder: Path, plan: Path, url: str, fake: Any, rows: int) -> dict[str, Any]:
    fake.reset()
    env = {**os.environ, "OPENAI_API_KEY": "sk-bench", "PYTHONPATH": str(ROOT)}  # the spec names the fake
    env.pop("OPENAI_BASE_URL", None)
    command = [sys.executable, "-m", "batchor.cli.main", "apply", str(plan), "--state", url, "--json"]
    started = time.perf_counter()
    procs = [subprocess.Popen(command, cwd=folder, env=env, stdout=subprocess.DEVNULL,
                              stderr=open(folder / f"worker{i}.err", "w")) for i in range(n)]
    samples: list[tuple[float, int]] = []
    while any(p.poll() is None for p in procs):
        samples.append((time.perf_counter(), fake.stats()["answered"]))
        time.sleep(0.1)
    wall = time.perf_counter() - started
    codes = [p.wait() for p in procs]
    stats = fake.stats()
    samples.append((time.perf_counter(), stats["answered"]))
    return {"workers": n, "rows": rows, "wall_s": round(wall, 2), "rows_per_s": round(rows / wall, 1),
            "steady_per_s": _steady(samples, rows), "answered": stats["answered"],
            "sent_429": stats["sent_429"], "exit_codes": codes}


def _steady(samples: list[tuple[float, int]], rows: int) -> float | None:
    try:
        (t1, a1), (t2, a2) = [next(s for s in samples if s[1] >= rows * f) for f in (0.25, 0.75)]
    except StopIteration:  # the workers stopped before answering 75 % of the rows
        return None
    return round((a2 - a1) / (t2 - t1), 1) if t2 > t1 else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--rpm", type=int, default=6000)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight per worker")
    args = parser.parse_args(argv)
    from batchor import api

    data = reviews_csv(args.rows)
    results = []
    with server() as pg, fake_server(latency_ms=args.latency_ms, rpm=args.rpm) as fake:
        for n in args.workers:
            folder = fresh_dir(f"workers-{n}")
            spec = write_spec(folder, data, base_url=fake.openai_base_url, concurrency=args.concurrency, rpm=args.rpm)
            url = create_database(pg)
            plan = folder / "job.plan"
            api.plan(spec, state=url, save=plan)
            result = run_workers(n, folder=folder, plan=plan, url=url, fake=fake, rows=args.rows)
            results.append(result)
            print(f"{n} worker(s): {result['wall_s']:6.1f} s wall, {result['rows_per_s']:6.1f} rows/s overall, "
                  f"{result['steady_per_s']} rows/s steady (limit {args.rpm / 60:.0f}/s), "
                  f"{result['sent_429']} x 429, answered {result['answered']}", flush=True)
    out = RESULTS / "workers.json"
    out.write_text(json.dumps({"args": vars(args), "results": results}, indent=2) + "\n")
    print(f"results written to {out}")
    return 0 if all(set(r["exit_codes"]) == {0} for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
