"""A spec with many steps and few rows: wall time of `plan` and `apply` for 200 and 2,000 steps.

    python benchmarks/many_steps.py [steps ...]      # default: 200 2000

Each spec has 2 rows and N independent mock text steps, run in-process through the real CLI with
a fresh state. Also prints what one read of such a plan's data costs when the file is opened
each time (a parquet footer grows with the columns, four per step): what apply paid per step and
pass before the plan's small data was read once (batchor/plan/plan_file.py).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import yaml
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import fresh_dir

from batchor.cli.main import app
from batchor.plan.plan_file import load_plan


def write_spec(folder: Path, steps: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rows.csv").write_text("id,text\nr1,first row\nr2,second row\n", encoding="utf-8")
    spec = {
        "version": 1,
        "name": f"steps{steps}",
        "input": {"path": "rows.csv", "key": "id"},
        "model": {"provider": "mock", "name": "echo"},
        "steps": {f"s{i}": {"prompt": f"Step {i}: {{{{ row.text }}}}", "output": "text"} for i in range(steps)},
        "output": {"path": "out.csv"},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def timed(args: list[str]) -> float:
    start = time.perf_counter()
    result = CliRunner().invoke(app, args)
    if result.exit_code != 0:
        raise SystemExit(f"{args[0]} failed ({result.exit_code}): {result.output[-2000:]}")
    return time.perf_counter() - start


def reopened_read_s(plan_path: Path, reads: int = 5) -> float:
    """Seconds per read of two columns when the plan's data file is opened for each read."""
    plan = load_plan(plan_path)
    data = plan.data_columns()[:2]
    start = time.perf_counter()
    for _ in range(reads):
        plan._small = False  # as before: streamed from the file at each read
        list(plan.iter_batches(data))
    return (time.perf_counter() - start) / reads


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:] if a.isdigit()] or [200, 2000]
    folder = fresh_dir("many-steps")
    for n in sizes:
        spec = write_spec(folder / f"n{n}", n)
        state = str(folder / f"n{n}" / "state.duckdb")
        saved = folder / f"n{n}" / "job.plan"
        plan_s = timed(["plan", str(spec), "--state", state, "--out", str(saved)])
        apply_s = timed(["apply", str(saved), "--yes", "--json", "--state", state])
        read_s = reopened_read_s(saved)
        print(
            f"{n:>5} steps x 2 rows: plan {plan_s:6.1f} s, apply {apply_s:6.1f} s; "
            f"one read of the plan's data opened each time {read_s * 1000:6.0f} ms",
            flush=True,
        )


if __name__ == "__main__":
    main()
