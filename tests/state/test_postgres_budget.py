"""The --max-cost budget of a shared run (PostgreSQL): workers draw it from one row, together
never pass the tightest limit any of them gave, and give back what they did not spend."""

from __future__ import annotations

import threading

import pytest

from batchor.engine.workers import SharedBudget
from batchor.state.base import RunRecord
from batchor.state.leases import LeaseBook
from batchor.state.postgres_store import PostgresStore
from tests.state.test_postgres_leases import store  # noqa: F401 - the same PostgreSQL store fixture

pytestmark = pytest.mark.postgres


def _book(store: PostgresStore, worker_id: str) -> LeaseBook:
    book = LeaseBook(store, worker_id, 30)
    book.join_run(RunRecord(run_id="r1", job_id="j", plan_id="p", name="n"), "host", 1)
    return book


def _committed(store: PostgresStore) -> float:
    return float(store.execute("SELECT committed_usd FROM run_budgets WHERE run_id = 'r1'")[0][0])


def test_a_run_without_max_cost_has_no_budget(store):
    assert _book(store, "w0").set_budget("r1", None) is None


def test_the_tightest_limit_any_worker_gives_is_the_runs(store):
    a, b = _book(store, "w0"), _book(store, "w1")
    assert a.set_budget("r1", 1.0) == 1.0
    assert b.set_budget("r1", 0.6) == 0.6
    assert a.set_budget("r1", 5.0) == 0.6
    assert b.set_budget("r1", None) == 0.6  # a worker without --max-cost is bound by the run's


def test_workers_together_never_spend_more_than_the_budget(store):
    books = [_book(store, f"w{i}") for i in range(3)]
    limit = books[0].set_budget("r1", 1.0)
    budgets = [SharedBudget(book, "r1", limit) for book in books]
    sent = [0, 0, 0]

    def spend(i: int) -> None:
        budget = budgets[i]
        while budget.try_reserve(0.013):
            budget.settle(0.013, 0.01)  # each request costs less than its worst case
            sent[i] += 1

    threads = [threading.Thread(target=spend, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    spent = sum(b.spent for b in budgets)
    assert spent <= 1.0 + 1e-9
    assert all(b.exhausted for b in budgets) and all(sent)
    # What is left unspent is at most a slice per worker (a draw smaller than one request is refused).
    assert 1.0 - spent <= 3 * (1.0 / SharedBudget.SLICES + 0.013)
    assert _committed(store) == pytest.approx(sum(b.drawn for b in budgets))
    for budget in budgets:
        budget.give_back()
    assert _committed(store) == pytest.approx(spent)


def test_a_later_budget_counts_what_workers_already_spent(store):
    book = _book(store, "w0")
    store.execute("UPDATE workers SET cost_usd = 0.4 WHERE worker_id = 'w0'")
    limit = book.set_budget("r1", 0.5)
    budget = SharedBudget(book, "r1", limit)
    assert budget.try_reserve(0.1)
    assert not budget.try_reserve(0.01)
