"""The batch ledger on a real DuckDB file: migration 2, named transitions, live keys, attempts."""

from __future__ import annotations

import duckdb

from batchor.state import open_state
from batchor.state.batches import BatchLedger, BatchRecord
from batchor.state.migrations import MIGRATIONS, SCHEMA_VERSION


def _record(batch_id: str, chunk: int = 0, fp: str = "fp1") -> BatchRecord:
    return BatchRecord(
        batch_id=batch_id,
        job_id="job1",
        run_id="run1",
        step="classify",
        step_fp=fp,
        provider="openai",
        model="gpt-4.1-mini",
        connection="{}",
        chunk=chunk,
        requests=2,
        input_tokens=20,
        created_s=1.0,
    )


def test_a_version_1_state_is_migrated_to_version_2(tmp_path):
    path = tmp_path / "old.duckdb"
    db = duckdb.connect(str(path))
    db.execute("CREATE TABLE batchor_meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    for sql in MIGRATIONS[0][1]:  # the tables a version 1 state has
        db.execute(sql)
    db.execute("INSERT INTO batchor_meta VALUES ('schema_version', '1')")
    db.close()
    store = open_state(str(path))
    assert store.execute("SELECT value FROM batchor_meta WHERE key = 'schema_version'")[0][0] == str(SCHEMA_VERSION)
    assert store.execute("SELECT count(*) FROM batches")[0][0] == 0


def test_intent_submitted_ended_collected(tmp_path):
    ledger = BatchLedger(open_state(str(tmp_path / "s.duckdb")))
    ledger.record_intent(_record("b1"), ["k1", "k2"])
    [live] = ledger.live_batches("fp1")
    assert (live.state, live.remote_id, ledger.batch_keys("b1")) == ("intent", None, ["k1", "k2"])
    ledger.mark_submitted("b1", "batch_x", "validating")
    ledger.mark_ended("b1", "expired", "expired", None)
    assert ledger.get("b1").state == "expired" and ledger.claimed_remote_ids("openai") == {"batch_x"}
    ledger.mark_collected("b1", {"k1": "ok", "k2": "missing"})
    done = ledger.get("b1")
    assert (done.state, done.succeeded, done.requeued) == ("collected", 1, 1)
    assert ledger.live_batches("fp1") == [] and ledger.next_chunk("job1", "classify") == 1
    assert [b["state"] for b in ledger.store.list_batches("job1")] == ["collected"]


def test_attempts_count_consumed_outcomes_since_the_last_final_failure(tmp_path):
    ledger = BatchLedger(open_state(str(tmp_path / "s.duckdb")))
    outcomes = [
        {"k": "retry", "j": "retry_free"},
        {"k": "failed", "j": "missing"},
        {"k": "retry", "j": "retry"},
        {"k": "unsent", "j": "unsent"},
    ]
    for i, batch in enumerate(outcomes):
        ledger.record_intent(_record(f"b{i}", chunk=i), list(batch))
        ledger.mark_collected(f"b{i}", batch)
    assert ledger.attempts_used(["k", "j", "new"]) == {"k": (1, 0), "j": (1, 2)}
