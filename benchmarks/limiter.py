"""The limiter under 429s: random 429 noise, and a server that enforces the limit it advertises.

    python benchmarks/limiter.py                      # both parts, about 40 s
    python benchmarks/limiter.py --rows 3000 --limit-rpm 2400 --limit-rows 600

Noise: the same job twice against a fake answering after 100 ms (concurrency 64), once clean and
once with 10 % random 429s carrying Retry-After 1 s and no rate-limit headers; prints both steady
throughputs and their ratio (target >= 0.85: 0.9 is the ceiling, the 429s cost their requests).
Limit: no rpm in the spec; the fake enforces `--limit-rpm` and advertises it in x-ratelimit-*
headers; prints the steady rate as a share of that limit (target >= 0.95) and the 429 share
(target < 1 %). Compare figures of one run: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import RESULTS, batchor, fake_server, fresh_dir, reviews_csv, steady_rate, write_spec


def apply_once(name: str, rows: int, concurrency: int, **fake: Any) -> dict[str, Any]:
    """One `batchor apply` of a fresh `rows`-row job against a fake configured by `fake`."""
    folder = fresh_dir(f"limiter-{name}")
    with fake_server(**fake) as server:
        spec = write_spec(folder, reviews_csv(rows), base_url=server.openai_base_url, concurrency=concurrency)
        run = batchor(
            ["apply", str(spec), "--state", str(folder / "state.duckdb"), "--json", "--yes"], cwd=folder
        ).check()
        stats = server.stats()
    return {
        "steady_per_s": steady_rate(run.events),
        "wall_s": round(run.wall_s, 2),
        "requests": stats["requests"],
        "sent_429": stats["sent_429"],
        "succeeded": run.event("run_finished")["succeeded"],
    }


def noise(rows: int, concurrency: int, latency_ms: float) -> dict[str, Any]:
    clean = apply_once("clean", rows, concurrency, latency_ms=latency_ms)
    noisy = apply_once("noisy", rows, concurrency, latency_ms=latency_ms, error_429=0.1, retry_after_s=1.0)
    ratio = noisy["steady_per_s"] / clean["steady_per_s"]
    print(
        f"noise: clean {clean['steady_per_s']:.0f} req/s, with 10 % 429s {noisy['steady_per_s']:.0f} req/s "
        f"({noisy['sent_429']} x 429), ratio {ratio:.3f} (target >= 0.85)",
        flush=True,
    )
    return {"clean": clean, "noisy": noisy, "ratio": round(ratio, 3)}


def enforced_limit(rows: int, concurrency: int, latency_ms: float, rpm: int) -> dict[str, Any]:
    found = apply_once("limit", rows, concurrency, latency_ms=latency_ms, rpm=rpm)
    share = found["steady_per_s"] / (rpm / 60)
    share_429 = found["sent_429"] / max(1, found["requests"])
    print(
        f"limit: {found['steady_per_s']:.1f} req/s against a {rpm} rpm server = {share:.3f} of the limit "
        f"(target >= 0.95), {found['sent_429']} x 429 = {share_429:.2%} (target < 1 %)",
        flush=True,
    )
    return {**found, "limit_rpm": rpm, "share_of_limit": round(share, 3), "share_429": round(share_429, 4)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4000, help="rows of each noise run")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--limit-rpm", type=int, default=2400)
    parser.add_argument("--limit-rows", type=int, default=600)
    parser.add_argument("--only", choices=["noise", "limit"])
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"args": vars(args)}
    if args.only != "limit":
        results["noise"] = noise(args.rows, args.concurrency, args.latency_ms)
    if args.only != "noise":
        results["limit"] = enforced_limit(args.limit_rows, args.concurrency, args.latency_ms, args.limit_rpm)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "limiter.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
