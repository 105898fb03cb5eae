"""Start-up: how long `batchor --help` takes, and how long `batchor apply` of a spec takes to send
its first request.

    python benchmarks/startup.py [rows] [repeats]        # default 8000 5

`--help`: wall time of the real script, median of `repeats`, beside a bare `python -c pass`
(the floor of any Python command on this machine). First request: a fresh state, the spec (not a
saved plan) applied against a fake that answers after 50 ms; the figure is the time from starting
the process to the first answer the run reports (its first `progress` event) minus that latency.
`apply` runs with `--limit 1` too, which shows what planning all the rows costs before sending.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import RESULTS, compiled, fake_server, fresh_dir, reviews_csv, write_spec

LATENCY_S = 0.05


def wall(command: list[str], repeats: int) -> float:
    """Median wall time of `command` (output discarded)."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def first_answer_s(rows: int, extra: list[str]) -> tuple[float, float]:
    """Seconds from starting `batchor apply SPEC` to its first answer, less the fake's latency, and
    the CPU seconds the process used until then (a fairer figure on a busy machine)."""
    compiled()
    folder = fresh_dir(f"startup-{rows}")
    with fake_server(latency_ms=LATENCY_S * 1000) as fake:
        spec = write_spec(folder, reviews_csv(rows), base_url=fake.openai_base_url, concurrency=64)
        command = [
            sys.executable,
            "-m",
            "batchor.cli.main",
            "apply",
            str(spec),
            "--state",
            str(folder / "state.duckdb"),
            "--json",
            "--yes",
            *extra,
        ]
        env = {**os.environ, "OPENAI_API_KEY": "sk-bench"}
        env.pop("BATCHOR_STATE", None)
        started = time.time()
        process = subprocess.Popen(
            command, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        assert process.stdout is not None
        first = None
        for line in process.stdout:
            event = json.loads(line) if line.startswith('{"event"') else {}
            if event.get("event") == "progress" and first is None:
                first = event["at"] - started - LATENCY_S
                process.kill()
                break
        _, _, usage = os.wait4(process.pid, 0)
        process.returncode = -9
    if first is None:
        raise SystemExit("apply reported no answer")
    return first, usage.ru_utime + usage.ru_stime


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 8000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    script = str(Path(sys.executable).with_name("batchor"))
    compiled()
    figures = {
        "python -c pass (s)": wall([sys.executable, "-c", "pass"], repeats),
        "batchor --help (s)": wall([script, "--help"], repeats),
    }
    for label, extra in ((f"apply {rows:,} rows", []), (f"apply {rows:,} rows --limit 1", ["--limit", "1"])):
        runs = [first_answer_s(rows, extra) for _ in range(3)]
        figures[f"{label}: first answer (s)"] = statistics.median(run[0] for run in runs)
        figures[f"{label}: CPU to it (s)"] = statistics.median(run[1] for run in runs)
    for name, value in figures.items():
        print(f"{name:45} {value:6.2f}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "startup.json").write_text(json.dumps({"rows": rows, **figures}, indent=2))


if __name__ == "__main__":
    main()
