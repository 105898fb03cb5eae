"""The benchmark scenarios: each returns figures, each figure with its target (if any).

A scenario prepares what it needs untimed (data, plans, filled state) and times only the command
the figure is about.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from harness import (
    batchor,
    checkpointed_size,
    count_rows,
    fake_server,
    fresh_dir,
    reviews_csv,
    steady_rate,
    table_bytes,
    write_spec,
)


@dataclass
class Figure:
    metric: str
    value: float | int | str | None
    unit: str = ""
    target: str | None = None  # e.g. "<= 20", ">= 1500"

    @property
    def ok(self) -> bool | None:
        if self.target is None or not isinstance(self.value, (int, float)):
            return None
        op, bound = self.target.split()
        return self.value <= float(bound) if op == "<=" else self.value >= float(bound)


@dataclass
class Outcome:
    scenario: str
    size: int
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, metric: str, value: Any, unit: str = "", target: str | None = None) -> None:
        self.figures.append(Figure(metric, value, unit, target))


def plan_throughput(quick: bool) -> Outcome:
    """`batchor plan` over a fresh state: wall time and peak RSS."""
    rows = 100_000 if quick else 1_000_000
    out = Outcome("plan", rows)
    data = reviews_csv(rows)
    folder = fresh_dir("plan")
    spec = write_spec(folder, data, base_url="http://127.0.0.1:9/v1")
    run = batchor(
        [
            "plan",
            str(spec),
            "--state",
            str(folder / "state.duckdb"),
            "--out",
            str(folder / "p.plan"),
            "--json",
        ],
        cwd=folder,
    ).check()
    out.add("wall", round(run.wall_s, 2), "s", None if quick else "<= 20")
    out.add("cpu", round(run.cpu_s, 2), "s")
    out.add("rows/s", round(rows / run.wall_s), "rows/s", None if quick else ">= 50000")
    out.add("peak RSS", round(run.max_rss_mb), "MB", "<= 600")
    out.add("plan file", round((folder / "p.plan").stat().st_size / 2**20, 1), "MB")
    return out


def realtime_zero_latency(quick: bool) -> Outcome:
    """Engine overhead: `batchor apply` of a saved plan against a fake answering instantly."""
    rows = 5_000 if quick else 20_000
    out = Outcome("realtime", rows)
    folder = fresh_dir("realtime")
    with fake_server(latency_ms=0) as fake:
        spec = write_spec(folder, reviews_csv(rows), base_url=fake.openai_base_url, concurrency=64)
        state = str(folder / "state.duckdb")
        batchor(["plan", str(spec), "--state", state, "--out", str(folder / "p.plan")], cwd=folder).check()
        run = batchor(["apply", str(folder / "p.plan"), "--state", state, "--json"], cwd=folder).check()
        stats = fake.stats()
    finished = run.event("run_finished")
    steady = steady_rate(run.events)
    out.add("steady rate", round(steady) if steady else None, "req/s", ">= 1500")
    out.add("end-to-end rate", round(rows / run.wall_s), "rows/s")
    out.add("apply wall", round(run.wall_s, 2), "s")
    out.add("apply CPU", round(run.cpu_s, 2), "s")
    out.add("apply CPU per row", round(1000 * run.cpu_s / rows, 3), "ms")
    out.add("peak RSS", round(run.max_rss_mb), "MB")
    out.add("calls", stats["requests"], "")
    out.add("succeeded", finished["succeeded"], "")
    return out


def realtime_rate_limited(quick: bool) -> Outcome:
    """Pacing: 200 ms latency, 6,000 rpm on both the fake and the spec."""
    rows = 600 if quick else 6_000  # 100 requests/s: 6 s or 60 s
    rpm = 6_000
    out = Outcome("rate-limited", rows)
    folder = fresh_dir("ratelimited")
    with fake_server(latency_ms=200, rpm=rpm) as fake:
        spec = write_spec(folder, reviews_csv(rows), base_url=fake.openai_base_url, concurrency=64, rpm=rpm)
        state = str(folder / "state.duckdb")
        run = batchor(["apply", str(spec), "--state", state, "--json", "--yes"], cwd=folder).check()
        stats = fake.stats()
    steady = steady_rate(run.events, 0.0, 0.95, skip_s=3.0)  # both buckets start full (1 s and 2 s)
    limit = rpm / 60
    out.add("achieved/limit", round(steady / limit, 3) if steady else None, "", ">= 0.95")
    out.add("steady rate", round(steady, 1) if steady else None, "req/s")
    out.add("429 share", round(stats["sent_429"] / max(stats["requests"], 1), 4), "", "<= 0.01")
    out.add("calls", stats["requests"], "")
    out.add("apply wall (plan incl.)", round(run.wall_s, 2), "s")
    return out


def reapply_cached(quick: bool) -> Outcome:
    """A finished run applied again: everything is cached, nothing may be sent."""
    rows = 100_000 if quick else 1_000_000
    out = Outcome("re-apply", rows)
    folder = fresh_dir("reapply")
    spec = write_spec(folder, reviews_csv(rows), provider="mock", concurrency=64)
    state = folder / "state.duckdb"
    plan = str(folder / "p.plan")
    batchor(["plan", str(spec), "--state", str(state), "--out", plan], cwd=folder).check()
    fill = batchor(["apply", plan, "--state", str(state), "--json"], cwd=folder).check()
    out.add("first run (mock)", round(fill.wall_s, 2), "s")
    before = count_rows(state, "attempts")
    run = batchor(["apply", plan, "--state", str(state), "--json"], cwd=folder).check()
    finished = run.event("run_finished")
    out.add("re-apply plan file", round(run.wall_s, 2), "s", None if quick else "<= 10")
    out.add("re-apply peak RSS", round(run.max_rss_mb), "MB")
    again = batchor(["apply", str(spec), "--state", str(state), "--json", "--yes"], cwd=folder).check()
    calls = count_rows(state, "attempts") - before  # every provider call leaves an attempt row
    for done in (finished, again.event("run_finished")):
        calls += done["succeeded"] + done["failed"]
    out.add("calls (both re-applies)", calls, "", "<= 0")
    out.add("re-plan + re-apply spec", round(again.wall_s, 2), "s")
    out.add("cached", again.event("run_finished")["cached"], "")
    return out


def state_size(quick: bool) -> Outcome:
    """Bytes of state per row after a run with short outputs (raw payloads kept)."""
    rows = 20_000 if quick else 100_000
    out = Outcome("state size", rows)
    folder = fresh_dir("statesize")
    with fake_server(latency_ms=0) as fake:
        spec = write_spec(folder, reviews_csv(rows), base_url=fake.openai_base_url, concurrency=64)
        state = folder / "state.duckdb"
        batchor(["apply", str(spec), "--state", str(state), "--yes", "--json"], cwd=folder).check()
    size = checkpointed_size(state)
    # The target is for 100,000 rows: at 20,000 the 256 KB blocks of each column are mostly empty.
    out.add("bytes/row", round(size / rows), "B", None if quick else "<= 512")
    out.add("state file", round(size / 2**20, 1), "MB")
    for table, nbytes in table_bytes(state).items():
        if table in ("results", "attempts", "job_requests"):
            out.add(f"{table} bytes/row", round(nbytes / rows), "B")
    return out


def batch_overhead(quick: bool) -> Outcome:
    """`mode: batch` against the fake Batch API (see batch_overhead.py): local work per row."""
    from batch_overhead import run_batch_overhead

    rows = 10_000 if quick else 100_000
    out = Outcome("batch mode", rows)
    found = run_batch_overhead(rows)
    out.add("apply wall (plan incl.)", found["wall_s"], "s")
    out.add("local CPU per row", found["cpu_us_per_row"], "us")
    out.add("wall per row", found["wall_us_per_row"], "us")
    out.add("peak RSS", round(found["max_rss_mb"]), "MB")
    out.add("fake CPU", found["fake_cpu_s"], "s")
    out.add("batches", found["batches"], "")
    out.add("answered", found["answered"], "")
    out.add("rows sent twice", found["duplicated_rows"], "", "<= 0")
    return out


SCENARIOS: dict[str, Callable[[bool], Outcome]] = {
    "plan": plan_throughput,
    "realtime": realtime_zero_latency,
    "ratelimited": realtime_rate_limited,
    "reapply": reapply_cached,
    "statesize": state_size,
    "batch": batch_overhead,
}
