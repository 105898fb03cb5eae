"""One state contract, two backends: every public method of the store (and the batch ledger
over it) behaves the same on DuckDB and on PostgreSQL."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

import pyarrow as pa
import pytest

from batchor.state import DuckDBStore, PostgresStore, apply_lock, is_postgres, open_state
from batchor.state.base import ATTEMPT_SCHEMA, RESULT_SCHEMA, RunRecord
from batchor.state.batches import BatchLedger, BatchRecord
from batchor.state.cache_fees import CacheFeeEntry
from batchor.state.postgres_store import normalize_url
from batchor.state.spend import failure_costs, run_spend
from batchor.state.step_maps import per_step


@pytest.fixture(params=["duckdb", "postgres"])
def store(request, tmp_path):
    if request.param == "duckdb":
        made = DuckDBStore(tmp_path / "state.duckdb")
    else:
        made = PostgresStore(request.getfixturevalue("pg_url"))
    yield made
    made.close()


def _results(*rows: tuple) -> pa.Table:
    """rows of (key, status, output, error_code, run_id)"""
    return pa.table(
        {
            "request_key": [r[0] for r in rows],
            "step": ["s"] * len(rows),
            "status": [r[1] for r in rows],
            "output": [r[2] for r in rows],
            "error_code": [r[3] for r in rows],
            "error": [("boom" if r[3] else None) for r in rows],
            "attempts": [1] * len(rows),
            "input_tokens": [10] * len(rows),
            "output_tokens": [5] * len(rows),
            "cost_usd": [0.5] * len(rows),
            "run_id": [r[4] for r in rows],
        },
        schema=RESULT_SCHEMA,
    )


def _attempts(
    *keys: str,
    raw: bytes | None = b"\x00raw",
    run_id: str = "r1",
    outcome: str = "ok",
    cost: float = 0.25,
    estimated: bool = False,
    cache: tuple[int, int, float] | None = None,  # cache reads, writes, cost without the cache
) -> pa.Table:
    n = len(keys)
    return pa.table(
        {
            "request_key": list(keys),
            "run_id": [run_id] * n,
            "attempt": [1] * n,
            "outcome": [outcome] * n,
            "status_code": [200] * n,
            "error": [None] * n,
            "duration_ms": [7] * n,
            "raw": [raw] * n,
            "input_tokens": [10] * n,
            "output_tokens": [5] * n,
            "cost_usd": [cost] * n,
            "estimated": [estimated] * n,
            "step": ["s"] * n,
            "counted_input_tokens": [8] * n,
            "feedback": [None] * n,
            "cache_read_tokens": [cache and cache[0]] * n,
            "cache_write_tokens": [cache and cache[1]] * n,
            "uncached_usd": [cache and cache[2]] * n,
        },
        schema=ATTEMPT_SCHEMA,
    )


def test_spend_is_the_sum_of_attempts(store):
    """Accepted and wasted (rejected) spend, estimates, and what each failed row cost, per run."""
    store.add_run_requests("j", "s", pa.table({"row_key": ["1", "2"], "request_key": ["a", "b"]}))
    store.record_results(_results(("a", "succeeded", "A", None, "r1")), _attempts("a", "b", outcome="invalid_output"))
    store.record_results(
        _results(("b", "failed", None, "invalid_output", "r1")), _attempts("a", "b", cost=0.5, estimated=True)
    )
    store.record_results(_results(), _attempts("a", run_id="r2", cost=1.0, cache=(6, 2, 1.25)))
    spend = run_spend(store, ["r1", "r2", "r3"])
    assert spend["r1"] == {
        "total_usd": 1.5,
        "accepted_usd": 1.0,
        "wasted_usd": 0.5,
        "estimated_usd": 1.0,
        "attempts_billed": 4,
        "attempts_rejected": 2,
        "input_tokens": 40,
        "output_tokens": 20,
        "cache_saved_usd": 0.0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "cache_fees_usd": 0.0,
        "caches_held": 0,
    }
    r2 = spend["r2"]  # what prompt caching saved: the cost without the cache less the cost
    assert (r2["cache_saved_usd"], r2["cache_read_tokens"], r2["cache_write_tokens"]) == (0.25, 6, 2)
    assert spend["r2"]["total_usd"] == 1.0 and spend["r2"]["wasted_usd"] == 0.0
    assert spend["r3"]["total_usd"] == 0.0
    assert failure_costs(store, "j") == {"invalid_output": {"rows": 1, "cost_usd": 0.5}}


def test_a_cache_fee_is_part_of_its_runs_spend_and_replaced_when_it_changes(store):
    """A context cache's fees (state/cache_fees.py): recorded when made (held to its expiry), then
    brought down when deleted (by a later run too: a batch step's cache outlives its apply); the
    run that made it counts them once, net of what caching saved."""
    store.record_results(_results(), _attempts("a", run_id="r2", cost=1.0, cache=(6, 2, 1.25)))
    made = CacheFeeEntry("r2", "cachedContents/1", "s", "gemini", "m", 2000, 10.0, 3610.0, False, 0.5, 0.25)
    store.record_cache_fee(made)
    assert run_spend(store, ["r2"])["r2"]["total_usd"] == 1.75
    later = replace(made, run_id="r3", held_until_s=370.0, deleted=True, storage_usd=0.025)
    assert store.record_cache_fee(later) == 0.75  # a later apply deleted it: replaces what r2 recorded
    spend = run_spend(store, ["r2", "r1", "r3"])
    assert spend["r3"]["caches_held"] == 0  # counted once, with the run that made it
    assert (spend["r2"]["total_usd"], spend["r2"]["cache_fees_usd"], spend["r2"]["caches_held"]) == (1.525, 0.525, 1)
    assert spend["r2"]["cache_saved_usd"] == pytest.approx(0.25 - 0.525) and spend["r1"]["caches_held"] == 0


def test_results_cache_and_replace(store):
    assert store.cached_keys(pa.array([], pa.string())) == set()
    store.record_results(
        _results(("a", "succeeded", "A", None, "r1"), ("b", "failed", None, "http_400", "r1")), _attempts("a", "b")
    )
    assert store.cached_keys(pa.array(["a", "b", "zz"])) == {"a"}
    assert store.cached_key_array(pa.array(["a", "a", "b", "zz"])).to_pylist() == ["a"]
    store.record_results(_results(("b", "succeeded", "B2", None, "r2")), None)  # a later answer replaces
    assert store.cached_keys(pa.array(["a", "b"])) == {"a", "b"}
    got = {r["request_key"]: r for r in store.results_for_keys(pa.array(["a", "b", "zz"])).to_pylist()}
    assert got == {
        "a": {"request_key": "a", "status": "succeeded", "output": "A"},
        "b": {"request_key": "b", "status": "succeeded", "output": "B2"},
    }


def test_failed_keys_by_error_code(store):
    assert store.failed_key_array(pa.array([], pa.string()), ["invalid_request"]).to_pylist() == []
    store.record_results(
        _results(
            ("a", "failed", None, "invalid_request", "r1"),
            ("b", "failed", None, "provider_unavailable", "r1"),
            ("c", "succeeded", "C", None, "r1"),
        ),
        None,
    )
    keys = pa.array(["a", "a", "b", "c", "zz", None], pa.string())
    assert store.failed_key_array(keys, ["invalid_request", "content_refused"]).to_pylist() == ["a"]
    assert store.failed_key_array(keys, []).to_pylist() == []


def test_job_requests_map_rows_to_results(store):
    assert not store.has_job_requests("j", "s")
    store.add_run_requests("j", "s", pa.table({"row_key": ["1", "2", "3"], "request_key": ["a", "b", "c"]}))
    store.add_run_requests("j", "s", pa.table({"row_key": ["3"], "request_key": ["c2"]}))  # re-rendered row
    assert store.has_job_requests("j", "s") and not store.has_job_requests("j", "other")
    store.record_results(_results(("a", "succeeded", "A", None, "r1"), ("b", "failed", None, "http_400", "r1")))
    rows = sorted(store.job_results("j", "s").to_pylist(), key=lambda r: r["row_key"])
    assert rows == [
        {
            "row_key": "1",
            "request_key": "a",
            "status": "succeeded",
            "output": "A",
            "error_code": None,
            "error": None,
            "model": None,
        },
        {
            "row_key": "2",
            "request_key": "b",
            "status": "failed",
            "output": None,
            "error_code": "http_400",
            "error": "boom",
            "model": None,
        },
        {
            "row_key": "3",
            "request_key": "c2",
            "status": None,
            "output": None,
            "error_code": None,
            "error": None,
            "model": None,
        },
    ]
    assert store.job_results("j", "none").num_rows == 0
    assert store.failures_by_reason("j") == {"http_400": 1}
    part = store.job_results_for_rows("j", "s", pa.array(["3", "x", None, "2"], pa.string()))
    assert sorted(part.to_pylist(), key=lambda r: r["row_key"]) == rows[1:]  # rows of the part only
    assert store.job_results_for_rows("j", "none", pa.array(["1"], pa.string())).num_rows == 0

    store.add_run_requests("j", "other", pa.table({"row_key": ["1"], "request_key": ["b"]}))
    store.forget_run_requests("j", "s")  # rows 2 and 3 are gone from the step (a shorter fan-out list)
    store.add_run_requests("j", "s", pa.table({"row_key": ["1"], "request_key": ["a"]}))
    assert [r["row_key"] for r in store.job_results("j", "s").to_pylist()] == ["1"]
    assert store.job_results("j", "other").num_rows == 1 and store.failures_by_reason("j") == {"http_400": 1}


def test_many_steps_maps_and_results_in_one_call(store):
    """A wave's steps are mapped and read together (state/step_maps.py), as each step alone would be."""
    store.add_run_requests("j", "old", pa.table({"row_key": ["1", "2"], "request_key": ["o1", "o2"]}))
    assert store.steps_with_requests("j", ["s", "t", "old"]) == {"old"}
    table = pa.table(
        {
            "step": ["s", "s", "t", "t", "t"],
            "row_key": ["1", "2", "1", "2", "2"],  # a row twice in a write: its first mapping counts
            "request_key": ["a", "b", "c", "d", "d2"],
        }
    )
    store.record_step_requests("j", table, forget=["old"])
    assert store.steps_with_requests("j", ["s", "t", "old"]) == {"s", "t"}
    store.record_step_requests("j", pa.table({"step": ["s"], "row_key": ["2"], "request_key": ["b2"]}))
    store.record_results(_results(("a", "succeeded", "A", None, "r1"), ("d", "failed", None, "http_400", "r1")))
    found = store.job_results_for_steps("j", ["t", "s", "none"], pa.array(["2", "1", "x"], pa.string()))
    t, s, none = per_step(found, ["t", "s", "none"])
    assert none.num_rows == 0
    assert sorted((r["row_key"], r["request_key"], r["status"]) for r in s.to_pylist()) == [
        ("1", "a", "succeeded"),
        ("2", "b2", None),
    ]
    assert sorted((r["row_key"], r["request_key"], r["status"]) for r in t.to_pylist()) == [
        ("1", "c", None),
        ("2", "d", "failed"),
    ]
    assert sorted(store.job_results("j", "s").to_pylist(), key=lambda r: r["row_key"]) == sorted(
        s.to_pylist(), key=lambda r: r["row_key"]
    )
    every = store.job_results_for_steps("j", ["s", "t"])  # no rows named: all of them
    assert sorted(every.column("step").to_pylist()) == ["s", "s", "t", "t"]


def test_job_latency_is_the_median_of_its_requests_attempts_whichever_run(store):
    assert store.job_latency_p50("j") is None
    store.add_run_requests("j", "s", pa.table({"row_key": ["1", "2"], "request_key": ["a", "b"]}))
    store.record_results(_results(), _attempts("a", "b", "c"))  # c is another job's: not counted
    store.record_results(_results(), _attempts("b", run_id="r2"))
    assert store.job_latency_p50("j") == 7.0 and store.job_latency_p50("other") is None


def test_run_history(store):
    assert store.get_run(None) is None and store.list_runs() == []
    store.start_run(RunRecord(run_id="r20260101-aaa", job_id="j", plan_id="p", name="first"))
    second = RunRecord(run_id="r20260102-bbb", job_id="j", plan_id="p", name="second", mocked=True)
    store.start_run(second)
    second.succeeded, second.cost_usd, second.status = 3, 1.25, "partial"
    store.finish_run(second, final=False)
    assert store.get_run("r20260102-bbb").finished_at is None
    store.finish_run(second)
    got = store.get_run("r20260102")  # a prefix is enough
    assert (got.name, got.status, got.succeeded, got.cost_usd, got.mocked) == ("second", "partial", 3, 1.25, True)
    assert isinstance(got.started_at, dt.datetime) and isinstance(got.finished_at, dt.datetime)
    assert [r.run_id for r in store.list_runs()] == ["r20260102-bbb", "r20260101-aaa"]
    assert len(store.list_runs(limit=1)) == 1


def test_execute_connection_and_session(store):
    store.record_results(_results(("a", "succeeded", "A", None, "r1")), _attempts("a"))
    assert store.execute("SELECT request_key, raw FROM attempts WHERE run_id = ? AND outcome LIKE 'o%'", ["r1"]) == [
        ("a", b"\x00raw")
    ]
    assert store.execute("UPDATE attempts SET raw = NULL WHERE raw IS NOT NULL") == [(1,)]  # DML: row count
    assert store.execute("CHECKPOINT") == []
    with store.session():
        with store.connection() as db:
            db.register("probe", pa.table({"k": ["a", "nope"]}))
            assert db.execute("SELECT count(*) FROM results r JOIN probe p ON r.request_key = p.k").fetchall() == [(1,)]
            db.unregister("probe")
        assert store.cached_keys(pa.array(["a"])) == {"a"}


def test_batch_ledger_transitions(store):
    ledger = BatchLedger(store)
    batch = BatchRecord(
        batch_id="b1",
        job_id="j",
        run_id="r1",
        step="s",
        step_fp="fp",
        provider="openai",
        model="m",
        connection="{}",
        chunk=ledger.next_chunk("j", "s"),
        requests=2,
    )
    ledger.record_intent(batch, ["k1", "k2"])
    assert [b.batch_id for b in ledger.live_batches("fp")] == ["b1"] and ledger.next_chunk("j", "s") == 1
    ledger.mark_submitted("b1", "remote-1", "validating")
    ledger.mark_polled("b1", "in_progress")
    ledger.mark_ended("b1", "completed", "completed", None)
    assert ledger.get("b1").state == "completed" and ledger.claimed_remote_ids("openai") == {"remote-1"}
    assert sorted(ledger.batch_keys("b1")) == ["k1", "k2"]
    ledger.mark_collected("b1", {"k1": "ok", "k2": "retry"})
    assert ledger.live_batches("fp") == [] and ledger.get("b1").succeeded == 1
    assert ledger.attempts_used(["k1", "k2"]) == {"k1": (1, 0), "k2": (1, 0)}
    assert [b["batch_id"] for b in store.list_batches("j")] == ["b1"]
    assert [b.batch_id for b in ledger.job_batches("j", live_only=True)] == []


def test_open_state_picks_the_backend(tmp_path, pg_url):
    assert isinstance(open_state(str(tmp_path / "s.duckdb")), DuckDBStore)
    assert isinstance(open_state(pg_url), PostgresStore)
    assert is_postgres("postgres://u@h/db") and not is_postgres("state.duckdb")
    assert normalize_url("postgres://u:p@h/db") == "postgresql+psycopg://u:p@h/db"
    assert normalize_url("postgresql://h/db") == "postgresql+psycopg://h/db"
    with apply_lock(pg_url), apply_lock(pg_url):  # no exclusive lock on shared state
        pass
    secret = PostgresStore(pg_url.replace("postgres@", "postgres:hunter2@"))
    assert "hunter2" not in secret.location


def test_a_request_answered_by_a_fallback_model_reads_as_that_answer(store):
    """engine/fallback.py: the failed request stays failed under its own key, linked to the answer."""
    table = _results(("a", "failed", None, "invalid_output", "r1"), ("fb", "succeeded", "B", None, "r1"))
    table = table.append_column("model", pa.array(["openai:m", "anthropic:n"]))
    store.record_results(table.append_column("answered_by", pa.array(["fb", None])), None)
    store.add_run_requests("j", "s", pa.table({"row_key": ["1"], "request_key": ["a"]}))
    store.add_run_requests("other", "s", pa.table({"row_key": ["1"], "request_key": ["a"]}))
    assert store.cached_keys(pa.array(["a"])) == {"a"}  # not asked of its own model again
    assert store.failed_key_array(pa.array(["a"]), ["invalid_output"]).to_pylist() == []
    assert store.results_for_keys(pa.array(["a"])).to_pylist() == [
        {"request_key": "a", "status": "succeeded", "output": "B"}
    ]
    store.follow_fallbacks("j", ["s", "t"])
    (row,) = store.job_results("j", "s").to_pylist()
    assert (row["request_key"], row["status"], row["output"], row["model"]) == ("fb", "succeeded", "B", "anthropic:n")
    assert store.job_results("other", "s").to_pylist()[0]["request_key"] == "a"  # another job's rows are its own
