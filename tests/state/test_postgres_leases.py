"""Shared-run transitions on PostgreSQL: claims never overlap, leases expire and are taken over,
the last worker closes the run, and the shared rate bucket grants no more than its rate."""

from __future__ import annotations

import asyncio
import collections
import threading
import time

import pyarrow as pa
import pytest

from batchor.engine.shared_limiter import SharedRateLimiter
from batchor.state.base import RESULT_SCHEMA, RunRecord
from batchor.state.leases import LeaseBook
from batchor.state.pg_session import qmark_to_pyformat
from batchor.state.postgres_store import PostgresStore

pytestmark = pytest.mark.postgres


@pytest.fixture
def store(pg_url):
    made = PostgresStore(pg_url, pool_size=8)
    yield made
    made.close()


def _run(run_id: str = "r1") -> RunRecord:
    return RunRecord(run_id=run_id, job_id="j", plan_id="p", name="n")


def _books(store: PostgresStore, n: int, run: RunRecord | None = None) -> list[LeaseBook]:
    books = [LeaseBook(store, f"w{i}", 30) for i in range(n)]
    for book in books:
        book.join_run(run or _run(), "host", 1)
    return books


def _expire(store: PostgresStore, worker_id: str) -> None:
    store.execute("UPDATE workers SET lease_until = now() - interval '1 second' WHERE worker_id = ?", [worker_id])


def _answer(store: PostgresStore, keys: list[str], status: str = "succeeded", run_id: str = "r1") -> None:
    n = len(keys)
    store.record_results(
        pa.table(
            {
                "request_key": keys,
                "step": ["s"] * n,
                "status": [status] * n,
                "output": ["x"] * n,
                "error_code": [None] * n,
                "error": [None] * n,
                "attempts": [1] * n,
                "input_tokens": [1] * n,
                "output_tokens": [1] * n,
                "cost_usd": [0.25] * n,
                "run_id": [run_id] * n,
            },
            schema=RESULT_SCHEMA,
        )
    )


def test_concurrent_claims_never_overlap(store):
    books = _books(store, 6)
    books[0].enqueue("r1", "s", [f"k{i}" for i in range(3000)])
    counts: collections.Counter[str] = collections.Counter()

    def drain(book: LeaseBook) -> None:
        while got := book.claim("r1", "s", 5):
            counts.update(k for k, _ in got)

    threads = [threading.Thread(target=drain, args=(b,)) for b in books]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(counts) == 3000 and set(counts.values()) == {1}


def test_claims_follow_plan_order_and_expired_leases_are_taken_over(store):
    a, b = _books(store, 2)
    a.enqueue("r1", "s", ["k0", "k1", "k2", "k3"])
    assert not b.enqueue("r1", "s", ["k1", "k3"])  # a later scan: the items are there, nothing is sent
    assert b.enqueue("r1", "s", ["k1", "k3", "k4"], widens=True)  # --refresh: new keys join, existing ones stay
    assert a.claim("r1", "s", 2) == [("k0", 0), ("k1", 1)]
    assert sorted(b.claim("r1", "s", 10)) == [("k2", 2), ("k3", 3), ("k4", 2)]
    assert a.open_items("r1", ["s"]) == (0, 3)  # nothing claimable, three held by b
    _expire(store, "w1")
    assert a.open_items("r1", ["s"]) == (3, 0)
    assert sorted(k for k, _ in a.claim("r1", "s", 10)) == ["k2", "k3", "k4"]
    _answer(store, ["k0", "k1", "k2", "k3", "k4"])  # storing answers closes the items
    assert a.open_items("r1", ["s"]) == (0, 0)


def test_workers_starting_together_add_the_items_once(store):
    books = _books(store, 6)
    keys = [f"k{i}" for i in range(2000)]
    added: list[bool] = []
    threads = [threading.Thread(target=lambda b=b: added.append(b.enqueue("r1", "s", keys))) for b in books]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(added) == [False] * 5 + [True]
    assert store.execute("SELECT count(*), count(DISTINCT request_key), max(position) FROM work_items") == [
        (2000, 2000, 1999)
    ]
    assert books[3].enqueue("r1", "other-step", ["k0"])  # another step of the run has its own items


def test_a_heartbeat_renews_every_claim_and_release_gives_them_back(store):
    a, b = _books(store, 2)
    a.enqueue("r1", "s", ["k0", "k1"])
    a.claim("r1", "s", 2)
    store.execute("UPDATE workers SET lease_until = now() + interval '50 milliseconds' WHERE worker_id = 'w0'")
    a.heartbeat("r1", {"succeeded": 5, "requests": 9})
    time.sleep(0.1)
    assert b.claim("r1", "s", 2) == []  # renewed: still a's
    assert a.release() == 2
    assert [k for k, _ in b.claim("r1", "s", 2)] == ["k0", "k1"]
    assert store.get_run("r1").succeeded == 5  # the run shows the workers' sums meanwhile


def test_failures_close_items_of_their_own_run_only(store):
    (a,) = _books(store, 1)
    a.enqueue("r1", "s", ["k0"])
    a.enqueue("other", "s", ["k0"])
    _answer(store, ["k0"], status="failed", run_id="r1")
    assert a.open_items("r1", ["s"]) == (0, 0) and a.open_items("other", ["s"]) == (1, 0)
    _answer(store, ["k0"], status="succeeded", run_id="r1")  # an answer closes it everywhere
    assert a.open_items("other", ["s"]) == (0, 0)


def test_workers_join_one_run_and_the_last_one_closes_it(store):
    first = LeaseBook(store, "w0", 30)
    run_a = first.join_run(_run("r1"), "host", 1)
    run_b = LeaseBook(store, "w1", 30).join_run(_run("r2"), "host", 2)
    assert run_a.run_id == run_b.run_id == "r1"
    first.enqueue("r1", "s", ["k0", "k1"])
    first.claim("r1", "s", 1)
    _answer(store, ["k0", "k1"])
    run_a.status = "succeeded"
    assert not first.leave(run_a, "finished", {"requests": 2, "succeeded": 1})
    assert store.get_run("r1").finished_at is None
    run_b.status = "succeeded"
    assert LeaseBook(store, "w1", 30).leave(run_b, "finished", {"requests": 2, "succeeded": 1})
    closed = store.get_run("r1")
    assert closed.finished_at is not None and (closed.succeeded, closed.cost_usd, closed.requests) == (2, 0.5, 2)
    assert store.execute("SELECT count(*) FROM work_items") == [(0,)]


def test_a_run_whose_workers_all_died_is_marked_died_and_a_new_one_starts(store):
    _books(store, 1)
    _expire(store, "w0")
    fresh = LeaseBook(store, "w9", 30).join_run(_run("r2"), "host", 3)
    assert fresh.run_id == "r2"
    assert store.get_run("r1").status == "died"
    workers = {w["worker_id"]: w for w in store.list_workers("r1")}
    assert workers["w0"]["status"] == "lost" and workers["w0"]["leases"] == 0


def _bucket(store: PostgresStore, requests: float, tokens: float, elapsed: float = 0.0, paused: float = 0.0) -> None:
    """The bucket row as the last draw left it, `elapsed` seconds ago, paused `paused` s more."""
    store.execute("DELETE FROM rate_buckets")
    store.execute(
        "INSERT INTO rate_buckets (rate_key, requests, tokens, updated_at, paused_until) VALUES "
        "('k', ?, ?, clock_timestamp() - make_interval(secs => ?), "
        "CASE WHEN ? > 0 THEN clock_timestamp() + make_interval(secs => ?) END)",
        [requests, tokens, elapsed, paused, paused],
    )


def _level(store: PostgresStore) -> tuple[float, float]:
    return store.execute("SELECT requests, tokens FROM rate_buckets WHERE rate_key = 'k'")[0]


def test_a_draw_refills_takes_partially_and_waits(store):
    book = LeaseBook(store, "w0", 30)
    _bucket(store, 0.0, 0.0, elapsed=5.0)  # 1/s for 5 s: 5 there, 3 taken (slow rates: the test may be slow)
    grant = book.take("k", 60, None, 10.0, 3, 0, 0)
    assert (grant.requests, grant.wait_s) == (3, 0.0) and _level(store)[0] == pytest.approx(2.0, abs=0.2)
    _bucket(store, 0.2, 0.0)  # 0.8 s until one request is there
    grant = book.take("k", 60, None, 10.0, 3, 0, 0)
    assert grant.requests == 0 and grant.wait_s == pytest.approx(0.8, abs=0.2)
    _bucket(store, 0.0, 50.0)  # tokens: a draw takes at least what it needs, at most what is there
    grant = book.take("k", None, 600, 10.0, 1, 400, 40)
    assert (grant.requests, grant.tokens) == (1, pytest.approx(50.0, abs=2)) and _level(store)[1] < 2
    _bucket(store, 5.0, 100.0, paused=2.5)
    grant = book.take("k", 600, 6000, 1.0, 1, 0, 0)
    assert grant.requests == 0 and grant.wait_s == pytest.approx(2.5, abs=0.05)  # a 429 paused everyone
    _bucket(store, 20.0, 0.0, elapsed=10.0)
    assert book.take("k", 600, None, 1.0, 50, 0, 0).requests == 10  # never above the bucket's capacity


def test_a_pause_holds_every_draw_and_the_first_draw_adds_a_full_bucket(store):
    book = LeaseBook(store, "w0", 30)
    assert book.take("new", 600, None, 2.0, 50, 0, 0).requests == 20  # 10/s, 2 s of burst
    grant = book.take("new", 600, None, 2.0, 0, 0, 0, pause_s=1.5)
    assert grant.requests == 0 and grant.wait_s == pytest.approx(1.5, abs=0.05)
    assert LeaseBook(store, "w1", 30).take("new", 600, None, 2.0, 5, 0, 0).wait_s > 1.3  # the others wait too


def test_shared_bucket_holds_the_rate_across_limiters(store):
    book = LeaseBook(store, "w0", 30)
    limiters = [SharedRateLimiter(book, "openai:m", 3000, None, burst_s=0.2) for _ in range(3)]
    taken = [0, 0, 0]

    async def hammer(i: int, until: float) -> None:
        while time.monotonic() < until:
            await limiters[i].acquire(1)
            taken[i] += 1

    started = time.monotonic()

    async def main() -> None:
        until = time.monotonic() + 1.0
        await asyncio.gather(*(hammer(i, until) for i in range(3)))

    asyncio.run(main())
    elapsed = time.monotonic() - started
    assert all(taken)
    assert sum(taken) <= 10 + 50 * elapsed + 3, taken  # capacity + rate x time (+ one in flight each)
    assert sum(taken) >= 0.6 * 50 * 1.0, taken


def test_qmark_placeholders_become_pyformat():
    assert (
        qmark_to_pyformat("SELECT '?', \"a?\" FROM t WHERE x = ? AND y LIKE 'a%'")
        == "SELECT '?', \"a?\" FROM t WHERE x = %s AND y LIKE 'a%%'"
    )
