"""Memory at scale: plan, fill and re-apply a job of N rows; peak RSS and CPU-seconds per phase.

    python benchmarks/scale.py --rows 1000000                 # ~3 min on 2 cores
    python benchmarks/scale.py --rows 10000000                # ~30 min, ~6 GB of disk
    python benchmarks/scale.py --rows 100000 --fill mock      # the first run through the engine

Phases, each `batchor` (or the filler) in a subprocess of its own, measured by wait4:
  input     the review CSV (generated once by DuckDB, cached under benchmarks/.work/data/)
  plan      `batchor plan SPEC --out p.plan` (mock provider)
  fill      `--fill synthetic` (default): one succeeded answer of the mock's shape per request of
            the plan, stored with the state's own `record_results` (the mock engine runs a few
            thousand rows a second: hours for 10M); `--fill mock`: `batchor apply p.plan`
  re-apply  `batchor apply p.plan` again: every row cached, the output (Parquet) written
Targets (issue 20 #5): plan and re-apply of 1M rows <= 400 MB; every phase of 10M < 2 GB.
`--keep` keeps the folder (benchmarks/.work/scale-N/) for a second look; it is deleted otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import ROOT, Measured, batchor, fresh_dir, reviews_csv, write_spec

_FILL_BATCH = 200_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--fill", choices=("synthetic", "mock"), default="synthetic")
    parser.add_argument("--keep", action="store_true", help="keep the job's folder")
    args = parser.parse_args(argv)
    folder = fresh_dir(f"scale-{args.rows}")
    started = time.perf_counter()
    data = reviews_csv(args.rows)
    print(
        f"input     {args.rows:,} rows, {data.stat().st_size / 2**20:,.0f} MB CSV "
        f"({time.perf_counter() - started:.0f} s)",
        flush=True,
    )
    spec = write_spec(folder, data, provider="mock", concurrency=64)
    state, plan = folder / "state.duckdb", folder / "p.plan"
    try:
        _phase("plan", batchor(["plan", str(spec), "--state", str(state), "--out", str(plan)], cwd=folder))
        if args.fill == "mock":
            _phase("fill", batchor(["apply", str(plan), "--state", str(state), "--json"], cwd=folder))
        else:
            _phase("fill", _measured([sys.executable, __file__, "--_fill", str(plan), str(state)], folder))
        run = batchor(["apply", str(plan), "--state", str(state), "--json"], cwd=folder)
        _phase("re-apply", run)
        done = run.event("run_finished")
        print(
            f"          rows {done['rows']}, cached {done['cached']:,}, sent {done['total']}; "
            f"output {Path(done['output']).stat().st_size / 2**20:,.0f} MB",
            flush=True,
        )
        print(f"disk      state {state.stat().st_size / 2**20:,.0f} MB, plan {plan.stat().st_size / 2**20:,.0f} MB")
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


def _phase(name: str, run: Measured) -> None:
    run.check()
    print(f"{name:<9} peak RSS {run.max_rss_mb:,.0f} MB, CPU {run.cpu_s:,.1f} s, wall {run.wall_s:,.1f} s", flush=True)


def _measured(command: list[str], cwd: Path) -> Measured:
    """Run a Python command like `harness.batchor` runs batchor: peak RSS and CPU from wait4."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(cwd / ".stdout", "w") as out, open(cwd / ".stderr", "w") as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
    return Measured(
        command,
        time.perf_counter() - started,
        usage.ru_maxrss / 1024,
        usage.ru_utime + usage.ru_stime,
        os.waitstatus_to_exitcode(status),
        (cwd / ".stdout").read_text(),
        (cwd / ".stderr").read_text(),
    )


def _fill(plan_path: Path, state_path: Path) -> None:
    """Store a succeeded answer (the mock's shape: valid against the schema) for every request
    key of the plan's first step, in batches, as a finished first run would have."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from batchor.plan.model import req_column
    from batchor.plan.plan_file import load_plan
    from batchor.state import DuckDBStore
    from batchor.state.base import RESULT_SCHEMA

    plan = load_plan(plan_path)
    step = plan.header.steps[0]
    store = DuckDBStore(state_path)
    sentiments, n = ["positive", "negative", "mixed"], 0
    for batch in plan.iter_batches([req_column(step.name, "key")], batch_size=_FILL_BATCH):
        keys = pc.unique(batch.column(0).drop_null())
        m = len(keys)
        outputs = [f'{{"sentiment":"{sentiments[(n + i) % 3]}","stars":{1 + (n + i) % 5}}}' for i in range(m)]
        store.record_results(
            pa.table(
                {
                    "request_key": keys,
                    "step": [step.name] * m,
                    "status": ["succeeded"] * m,
                    "output": outputs,
                    "error_code": pa.nulls(m, pa.string()),
                    "error": pa.nulls(m, pa.string()),
                    "attempts": pa.array([1] * m, pa.int16()),
                    "input_tokens": pa.array([60] * m, pa.int32()),
                    "output_tokens": pa.array([10] * m, pa.int32()),
                    "cost_usd": [0.0] * m,
                    "run_id": ["rfill"] * m,
                },
                schema=RESULT_SCHEMA,
            )
        )
        n += m
    store.close()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--_fill":
        _fill(Path(sys.argv[2]), Path(sys.argv[3]))
        sys.exit(0)
    sys.exit(main())
