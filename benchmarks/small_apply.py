"""Small applies in one warm process: CPU-seconds per apply and DuckDB instances each creates.

    python benchmarks/small_apply.py [applies] [--profile]        # default 20

Each apply is `batchor apply SPEC --mock --yes --json` on a 3-row CSV with a fresh state, run
in-process through the real CLI (typer's runner), as most of the default test tier does. The
first apply warms the imports and is not counted. DuckDB instances are counted by wrapping
`duckdb.connect` here (a `.cursor()` of an open connection is not an instance). `--profile`
runs the applies under cProfile and prints the top functions by cumulative time.
"""

from __future__ import annotations

import cProfile
import pstats
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import fresh_dir, reviews_csv, write_spec
from typer.testing import CliRunner

from batchor.cli.main import app

INSTANCES = {"n": 0}
_CONNECT = duckdb.connect


def _counting_connect(*args: Any, **kwargs: Any) -> duckdb.DuckDBPyConnection:
    INSTANCES["n"] += 1
    return _CONNECT(*args, **kwargs)


def one_apply(folder: Path, data: Path, index: int) -> None:
    """`apply --mock` of the 3-row spec into a fresh folder and state."""
    work = folder / f"run{index}"
    shutil.rmtree(work, ignore_errors=True)
    spec = write_spec(work, data, concurrency=4)
    result = CliRunner().invoke(
        app, ["apply", str(spec), "--mock", "--yes", "--json", "--state", str(work / "state.duckdb")]
    )
    if result.exit_code != 0:
        raise SystemExit(f"apply failed ({result.exit_code}): {result.output[-2000:]}")


def main() -> None:
    applies = int(next((a for a in sys.argv[1:] if a.isdigit()), "20"))
    folder = fresh_dir("small-apply")
    data = reviews_csv(3)
    duckdb.connect = _counting_connect  # type: ignore[assignment]
    one_apply(folder, data, 0)  # imports, first-use caches
    INSTANCES["n"] = 0
    profiler = cProfile.Profile(time.process_time) if "--profile" in sys.argv else None
    cpu, wall = time.process_time(), time.perf_counter()
    if profiler:
        profiler.enable()
    for i in range(1, applies + 1):
        one_apply(folder, data, i)
    if profiler:
        profiler.disable()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(
        f"{applies} small applies: {cpu / applies:.3f} CPU-s per apply, {wall / applies:.3f} s wall, "
        f"{INSTANCES['n'] / applies:.1f} DuckDB instances per apply"
    )
    if profiler:
        order = sys.argv[-1] if sys.argv[-1] in ("tottime", "cumulative") else "cumulative"
        top = int(next((a[6:] for a in sys.argv if a.startswith("--top=")), "45"))
        pstats.Stats(profiler).sort_stats(order).print_stats(top)


if __name__ == "__main__":
    main()
