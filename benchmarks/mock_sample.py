"""A 10-row `--mock` apply from the command line: wall and CPU seconds of the whole process.

    python benchmarks/mock_sample.py [rounds]        # default 5

Runs `python -m batchor.cli.main apply specs/reviews.yaml --mock --yes --sample 10` with a fresh
state each time, in alternated rounds of two cases sharing one batchor cache folder: `cold`
(the remembered token counts deleted first: the tokenizer is built, as on a first plan) and
`warm` (the counts of the same texts remembered by the run before). CPU is the process's user +
sys time (`wait4`), the fairer figure on a shared machine; wall is printed beside it. Also a
bare `python -c pass` as the floor of any Python command.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = Path(os.environ.get("BENCH_DIR", "/tmp/batchor-bench")) / "mock-sample"


def run(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one process."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=WORK, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"{command} failed: {process.stderr.read().decode()[-2000:] if process.stderr else ''}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    shutil.rmtree(WORK, ignore_errors=True)
    for folder in ("specs", "schemas", "examples/data"):
        shutil.copytree(ROOT / folder, WORK / folder)
    cache = WORK / "cache"
    env = {**os.environ, "BATCHOR_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    env.pop("BATCHOR_STATE", None)
    apply = [sys.executable, "-m", "batchor.cli.main", "apply", "specs/reviews.yaml", "--mock", "--yes"]
    apply += ["--sample", "10", "--force", "--state"]
    figures: dict[str, list[tuple[float, float]]] = {"python -c pass": [], "cold": [], "warm": []}
    run([*apply, str(WORK / "warmup.duckdb")], env)  # byte-compiles, unpacks the vocabulary, prices
    for round_ in range(rounds):
        figures["python -c pass"].append(run([sys.executable, "-c", "pass"], env))
        for case in ("cold", "warm"):
            if case == "cold":
                for memo in cache.glob("vocab/*.counts"):
                    memo.unlink()
            figures[case].append(run([*apply, str(WORK / f"{case}-{round_}.duckdb")], env))
    for case, runs in figures.items():
        wall, cpu = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
        print(f"{case:16} wall {wall:5.2f} s   CPU {cpu:5.2f} s   (median of {len(runs)})")


if __name__ == "__main__":
    main()
