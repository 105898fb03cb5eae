"""Queries and CPU per plan and per apply of a 5-row `--mock` job: what each test that applies pays.

    python benchmarks/state_queries.py [rounds] [--sites]      # default 10 rounds

Each round plans `specs/reviews.yaml --mock --limit 5` into a fresh state (`api.plan`), then
applies that plan (`api.apply` of the compiled plan) and plans it again (`re-plan`: every answer
cached, the state has a run's history), in this process after two warm-up rounds.
It prints the CPU seconds (`time.process_time`, all threads) per plan and per apply and the
DuckDB statements each made: calls of `execute`, `executemany`, `sql` and `query` on a DuckDB
connection (every connection is proxied from the start to count them), split into those made
from `batchor/state/` (the state's queries) and the rest (input reads, exports, local steps).
`--sites` lists the call sites (file:line of the caller, mean count per plan or apply, and the
CPU of the calls on the calling thread: a `sql` relation runs later, when it is fetched).
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

import duckdb

from batchor import api

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "reviews.yaml"
_CONNECT = duckdb.connect
_SOURCE = str(Path(api.__file__).resolve().parents[2])  # the checkout whose batchor is imported


class Counted:
    """A DuckDB connection that counts its statements by the Python line that made them (the
    connection type is a C++ class: its methods cannot be wrapped in place, so it is proxied)."""

    def __init__(self, db: Any, counter: QueryCounter) -> None:
        self._db, self._counter = db, counter

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)

    def __enter__(self) -> Counted:
        return self

    def __exit__(self, *exc: object) -> None:
        self._db.close()

    def cursor(self) -> Counted:
        return Counted(self._db.cursor(), self._counter)

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        return self._statement("execute", args, kwargs)

    def executemany(self, *args: Any, **kwargs: Any) -> Any:
        return self._statement("executemany", args, kwargs)

    def sql(self, *args: Any, **kwargs: Any) -> Any:
        return self._statement("sql", args, kwargs)

    def query(self, *args: Any, **kwargs: Any) -> Any:
        return self._statement("query", args, kwargs)

    def _statement(self, method: str, args: tuple, kwargs: dict) -> Any:
        started = time.thread_time()
        result = getattr(self._db, method)(*args, **kwargs)
        self._counter.count(sys._getframe(2), time.thread_time() - started)
        return self if result is self._db else result


class QueryCounter:
    """Every DuckDB connection of the process is a `Counted` one reporting to `QUERIES.sites`."""

    def __init__(self) -> None:
        self.sites: collections.Counter[str] = collections.Counter()
        self.cpu: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def count(self, frame: FrameType, cpu: float) -> None:
        site = _where(frame)
        if frame.f_code.co_name == "execute" and frame.f_back is not None:  # the store's generic read
            site += " <- " + _where(frame.f_back)
        with self._lock:
            self.sites[site] += 1
            self.cpu[site] += cpu

    def install(self) -> None:
        def connect(*args: Any, **kwargs: Any) -> Counted:
            return Counted(_CONNECT(*args, **kwargs), self)

        duckdb.connect = connect

    def take(self) -> tuple[collections.Counter[str], collections.Counter[str]]:
        """The statements counted since the last take, by site, and the CPU seconds of their calls."""
        with self._lock:
            taken = self.sites, self.cpu
            self.sites, self.cpu = collections.Counter(), collections.Counter()
        return taken


def _where(frame: FrameType) -> str:
    path = frame.f_code.co_filename
    where = os.path.relpath(path, _SOURCE) if path.startswith(_SOURCE) else path
    return f"{where}:{frame.f_lineno} {frame.f_code.co_name}"


def split(sites: collections.Counter[str]) -> tuple[int, int]:
    """(the state's queries, the others)"""
    state = sum(n for site, n in sites.items() if site.startswith("batchor/state/"))
    return state, sum(sites.values()) - state


QUERIES = QueryCounter()


def plan_once(folder: Path) -> Any:
    os.chdir(folder)
    return api.plan(str(SPEC), mock=True, limit=5, state=str(folder / "state.duckdb"), save=False)


def apply_once(folder: Path, compiled: Any) -> None:
    api.apply(
        compiled,
        state=str(folder / "state.duckdb"),
        output=str(folder / "out.csv"),
        handle_signals=False,
        progress=False,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rounds", nargs="?", type=int, default=10)
    parser.add_argument("--sites", action="store_true")
    args = parser.parse_args()
    QUERIES.install()  # before any connection is made; a Python call more per statement
    scratch = Path(tempfile.mkdtemp(prefix="batchor-state-queries-"))
    for warm in ("warm0", "warm1"):  # imports, caches; the first new state is migrated, later ones copied
        apply_once(scratch / warm, plan_once(_fresh(scratch / warm)))
    counted = {name: (collections.Counter[str](), collections.Counter[str]()) for name in ("plan", "apply", "re-plan")}
    timed = {"plan": 0.0, "apply": 0.0, "re-plan": 0.0}
    for i in range(args.rounds):
        folder = _fresh(scratch / f"r{i}")
        QUERIES.take()
        started = time.process_time()
        compiled = plan_once(folder)
        timed["plan"] += time.process_time() - started
        _add(counted["plan"], QUERIES.take())
        started = time.process_time()
        apply_once(folder, compiled)
        timed["apply"] += time.process_time() - started
        _add(counted["apply"], QUERIES.take())
        started = time.process_time()
        plan_once(folder)
        timed["re-plan"] += time.process_time() - started
        _add(counted["re-plan"], QUERIES.take())
    shutil.rmtree(scratch, ignore_errors=True)
    n = args.rounds
    for name, (sites, cpu) in counted.items():
        state, other = split(sites)
        print(
            f"{name}: {timed[name] / n:.3f} CPU-s, {state / n:.1f} state queries, {other / n:.1f} other (mean of {n})"
        )
        if args.sites:
            for site, count in sorted(sites.items()):
                print(f"  {count / n:5.1f} {1000 * cpu[site] / n:6.2f} ms  {site}")


def _add(into: tuple[collections.Counter[str], ...], taken: tuple[collections.Counter[str], ...]) -> None:
    for total, part in zip(into, taken):
        total.update(part)


def _fresh(folder: Path) -> Path:
    folder.mkdir(parents=True)
    return folder


if __name__ == "__main__":
    main()
