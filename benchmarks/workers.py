"""Throughput of 1, 2 and 4 `batchor apply` workers on one run, sharing PostgreSQL state.

    python benchmarks/workers.py                          # rpm 6000, latency 100 ms, 2,000 rows
    python benchmarks/workers.py --workers 1 2 4 --rows 3000 --concurrency 8 --rpm 6000 --latency-ms 100

A fake provider (own process) answers after `--latency-ms` and refuses above `--rpm` with 429s;
the spec carries the same rpm, which the workers share. Each worker runs `--concurrency` requests
at once, so one worker alone is bound by latency (concurrency / latency) and several by the
shared limit. PostgreSQL: $BATCHOR_TEST_PG_URL, or a throwaway cluster (tests/pg_server.py).
Figures: wall time from the first worker's start to the last one's exit (start-up included),
the steady rate at the provider between 25 % and 75 % of the rows, and CPU-seconds: per worker
process (its own rusage, start-up included), of the PostgreSQL server (all its processes) and of
the fake, each also per answer. CPU per answer holds up on a loaded machine where rates do not.
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
    postmaster = _postmaster(url)
    started = time.perf_counter()
    before = {"postgres": pg_cpu_s(postmaster), "fake": process_cpu_s(fake.process.pid)}
    procs = [
        subprocess.Popen(
            command,
            cwd=folder,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(folder / f"worker{i}.err", "w"),  # noqa: SIM115
        )
        for i in range(n)
    ]
    samples: list[tuple[float, int, float, float]] = []  # time, answers, workers' CPU-s, PostgreSQL's CPU-s
    ended: dict[int, tuple[int, float]] = {}
    while len(ended) < n:
        workers_cpu = sum(ended[p.pid][1] if p.pid in ended else process_cpu_s(p.pid) for p in procs)
        samples.append((time.perf_counter(), fake.stats()["answered"], workers_cpu, pg_cpu_s(postmaster)))
        time.sleep(0.1)
        ended.update(_reap(procs, ended))
    wall = time.perf_counter() - started
    stats = fake.stats()
    time.sleep(0.5)  # the workers' PostgreSQL backends end just after them
    cpu = {
        "postgres": pg_cpu_s(postmaster) - before["postgres"],
        "fake": process_cpu_s(fake.process.pid) - before["fake"],
    }
    worker_cpu = [round(ended[p.pid][1], 2) for p in procs]
    samples.append((time.perf_counter(), stats["answered"], sum(worker_cpu), before["postgres"] + cpu["postgres"]))
    answered = max(1, stats["answered"])
    window = _steady(samples, rows)
    return {
        "workers": n,
        "rows": rows,
        "wall_s": round(wall, 2),
        "rows_per_s": round(rows / wall, 1),
        "steady_per_s": window.get("per_s"),
        "answered": stats["answered"],
        "sent_429": stats["sent_429"],
        "exit_codes": [ended[p.pid][0] for p in procs],
        "worker_cpu_s": worker_cpu,
        "worker_cpu_ms_per_answer": round(1000 * sum(worker_cpu) / answered, 3),
        "steady_worker_cpu_ms_per_answer": window.get("worker_ms"),
        "postgres_cpu_s": round(cpu["postgres"], 2),
        "postgres_cpu_ms_per_answer": round(1000 * cpu["postgres"] / answered, 3),
        "steady_postgres_cpu_ms_per_answer": window.get("postgres_ms"),
        "fake_cpu_s": round(cpu["fake"], 2),
    }


def _steady(samples: list[tuple[float, int, float, float]], rows: int) -> dict[str, float]:
    """Between 25 % and 75 % of the rows: answers per second, and CPU ms per answer of the workers
    (start-up left out) and of PostgreSQL."""
    try:
        (t1, a1, w1, p1), (t2, a2, w2, p2) = [next(s for s in samples if s[1] >= rows * f) for f in (0.25, 0.75)]
    except StopIteration:  # the workers stopped before answering 75 % of the rows
        return {}
    if t2 <= t1 or a2 <= a1:
        return {}
    return {
        "per_s": round((a2 - a1) / (t2 - t1), 1),
        "worker_ms": round(1000 * (w2 - w1) / (a2 - a1), 3),
        "postgres_ms": round(1000 * (p2 - p1) / (a2 - a1), 3),
    }


def _reap(procs: list[subprocess.Popen], ended: dict[int, tuple[int, float]]) -> dict[int, tuple[int, float]]:
    """Exit codes and CPU-seconds (user + system, from the kernel's rusage) of workers that ended."""
    done = {}
    for proc in procs:
        if proc.pid in ended:
            continue
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            done[pid] = (proc.returncode, usage.ru_utime + usage.ru_stime)
    return done


def process_cpu_s(pid: int, children: bool = False) -> float:
    """CPU-seconds a live process used (with its waited-for children's when `children`)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    ticks = sum(int(v) for v in fields[11 : 15 if children else 13])
    return ticks / os.sysconf("SC_CLK_TCK")


def _postmaster(url: str) -> int | None:
    """The server's process id (None when it runs elsewhere or its files cannot be read)."""
    import psycopg

    with psycopg.connect(url) as conn:
        data = conn.execute("SHOW data_directory").fetchone()[0]
    try:
        return int((Path(data) / "postmaster.pid").read_text().split()[0])
    except OSError:
        return None


def pg_cpu_s(postmaster: int | None) -> float:
    """CPU-seconds of the whole PostgreSQL server so far: the postmaster with its ended backends,
    plus every live child process (backends, checkpointer, autovacuum...); NaN when unknown."""
    if postmaster is None:
        return float("nan")
    total = process_cpu_s(postmaster, children=True)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rpartition(")")[2].split()
                if int(stat[1]) == postmaster:
                    total += process_cpu_s(int(entry.name))
            except (OSError, ValueError):
                continue  # ended meanwhile
    return total


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
            print(
                f"{n} worker(s): {result['wall_s']:6.1f} s wall, {result['rows_per_s']:6.1f} rows/s overall, "
                f"{result['steady_per_s']} rows/s steady (limit {args.rpm / 60:.0f}/s), "
                f"{result['sent_429']} x 429, answered {result['answered']}; CPU ms per answer, steady "
                f"(whole run): workers {result['steady_worker_cpu_ms_per_answer']} "
                f"({result['worker_cpu_ms_per_answer']}), PostgreSQL {result['steady_postgres_cpu_ms_per_answer']} "
                f"({result['postgres_cpu_ms_per_answer']}); worker CPU-s {result['worker_cpu_s']}, "
                f"fake {result['fake_cpu_s']}",
                flush=True,
            )
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "workers.json"
    out.write_text(json.dumps({"args": vars(args), "results": results}, indent=2) + "\n")
    print(f"results written to {out}")
    return 0 if all(set(r["exit_codes"]) == {0} for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
