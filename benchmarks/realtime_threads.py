"""Where a realtime apply's CPU goes by thread, and its resident memory over time.

    python benchmarks/realtime_threads.py [rows]        # default 5000

Plans `rows` rows against the fake answering at once, then runs `batchor apply PLAN --json` and
reads /proc every 0.1 s: the CPU seconds of the main thread (the event loop: rendering, sending,
parsing, recording) apart from every other thread's (state writes and row hand-outs on the
default executor, DuckDB's own threads), and the resident set. On a loaded machine a run takes
longer, so work done per flush (every 0.25 s) costs more per row: compare runs made side by side.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import ROOT, batchor, fake_server, fresh_dir, reviews_csv, write_spec

TICK = os.sysconf("SC_CLK_TCK")


def _threads(pid: int) -> dict[str, float]:
    """CPU seconds of each live thread of `pid`, by thread id."""
    found: dict[str, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        found[tid] = (int(fields[11]) + int(fields[12])) / TICK
    return found


def _rss_mb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) // 1024


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    folder = fresh_dir("realtime-threads")
    with fake_server(latency_ms=0) as fake:
        spec = write_spec(folder, reviews_csv(rows), base_url=fake.openai_base_url, concurrency=64)
        state = str(folder / "state.duckdb")
        batchor(["plan", str(spec), "--state", state, "--out", str(folder / "p.plan")], cwd=folder).check()
        env = {**os.environ, "OPENAI_API_KEY": "sk-bench", "PYTHONPATH": str(ROOT)}
        command = [
            sys.executable,
            "-m",
            "batchor.cli.main",
            "apply",
            str(folder / "p.plan"),
            "--state",
            state,
            "--json",
        ]
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=folder, env=env, stdout=subprocess.DEVNULL)
        cpu: dict[str, float] = {}
        rss: list[tuple[float, int]] = []
        while process.poll() is None:
            try:
                cpu.update(_threads(process.pid))
                rss.append((time.perf_counter() - started, _rss_mb(process.pid)))
            except (OSError, IndexError):  # the process ended between two reads
                pass
            time.sleep(0.1)
        wall = time.perf_counter() - started
    main_cpu = cpu.pop(str(process.pid), 0.0)
    print(f"{rows:,} rows, {wall:.1f} s wall, load average {os.getloadavg()[0]:.1f}")
    print(f"main thread {main_cpu:.2f} CPU-s, {len(cpu)} other threads {sum(cpu.values()):.2f} CPU-s")
    print(
        f"peak RSS {max(r for _, r in rss)} MB; every tenth of the run: "
        + ", ".join(f"{at:.0f}s {mb}" for at, mb in rss[:: max(1, len(rss) // 10)])
    )


if __name__ == "__main__":
    main()
