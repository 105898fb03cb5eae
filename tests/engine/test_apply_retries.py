"""Failure handling against the fake: 5xx retried with attempts recorded, 4xx failing one row,
malformed answers re-asked then failed, 429s waited out without using an attempt."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from conftest import make_spec

from batchor import api

STATE = Path(".batchor") / "state.duckdb"


def query(workdir: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(workdir / STATE), read_only=True) as db:
        return db.execute(sql).fetchall()


def spec_with_attempts(workdir: Path, rows: int, attempts: int) -> Path:
    return make_spec(
        workdir,
        rows=rows,
        limits={"concurrency": 4, "max_attempts": attempts, "request_timeout_s": 10},
    )


def test_5xx_are_retried_until_every_row_succeeds(workdir, fake):
    fake.configure(error_500=0.3, seed=7)
    spec = spec_with_attempts(workdir, rows=12, attempts=12)
    outcome = api.apply(spec, handle_signals=False)
    assert (outcome.status, outcome.succeeded, outcome.failed) == ("succeeded", 12, 0)
    stats = fake.stats()
    assert stats["sent_500"] > 0
    assert stats["answered"] == 12 and set(stats["by_prompt"].values()) == {1}
    failed_attempts = query(
        workdir,
        "SELECT count(*) FROM attempts WHERE outcome = 'provider_unavailable' AND status_code = 500",
    )[0][0]
    assert failed_attempts == stats["sent_500"]
    # each result counts its attempts: the 500s it met plus the one that succeeded
    per_key = dict(query(workdir, "SELECT request_key, count(*) FROM attempts GROUP BY 1"))
    results = dict(query(workdir, "SELECT request_key, attempts FROM results WHERE status = 'succeeded'"))
    assert results == per_key
    assert max(results.values()) > 1


def test_400_fails_only_its_row(workdir, fake):
    fake.configure(fail_matching={"review number 1": 400})
    spec = spec_with_attempts(workdir, rows=4, attempts=3)
    outcome = api.apply(spec, handle_signals=False)
    assert (outcome.status, outcome.succeeded, outcome.failed) == ("partial", 3, 1)
    failed = query(workdir, "SELECT error_code, attempts FROM results WHERE status = 'failed'")
    assert failed == [("invalid_request", 1)]


def test_always_malformed_answer_is_re_asked_then_fails_as_invalid_output(workdir, fake):
    fake.configure(fail_matching={"review number 2": "malformed"})
    spec = spec_with_attempts(workdir, rows=4, attempts=3)
    outcome = api.apply(spec, handle_signals=False)
    assert (outcome.succeeded, outcome.failed) == (3, 1)
    counts = sorted(fake.stats()["by_prompt"].values())
    assert counts == [1, 1, 1, 3]  # the malformed one was asked max_attempts times
    failed = query(workdir, "SELECT error_code, attempts FROM results WHERE status = 'failed'")
    assert failed == [("invalid_output", 3)]
    row = [line for line in (workdir / "out" / "results.csv").read_text().splitlines() if line.startswith("r2,")]
    assert ',failed,"classify: invalid_output: answer does not match the output schema' in row[0]


def test_sometimes_malformed_answers_are_re_asked_until_valid(workdir, fake):
    fake.configure(malformed=0.4, seed=3)
    spec = spec_with_attempts(workdir, rows=10, attempts=12)
    outcome = api.apply(spec, handle_signals=False)
    assert (outcome.succeeded, outcome.failed) == (10, 0)
    stats = fake.stats()
    assert stats["faults"].get("malformed", 0) > 0
    assert stats["answered"] == 10 + stats["faults"]["malformed"]
    invalid = query(workdir, "SELECT count(*) FROM attempts WHERE outcome = 'invalid_output'")[0][0]
    assert invalid == stats["faults"]["malformed"]


def test_429s_are_waited_out_without_using_an_attempt(workdir, fake):
    fake.configure(error_429=0.4, retry_after_s=0.05, seed=5)
    # one attempt allowed: a 429 that used one up would fail its row
    spec = spec_with_attempts(workdir, rows=10, attempts=1)
    outcome = api.apply(spec, handle_signals=False)
    assert (outcome.succeeded, outcome.failed) == (10, 0)
    assert fake.stats()["sent_429"] > 0
    limited = {k for (k,) in query(workdir, "SELECT DISTINCT request_key FROM attempts WHERE outcome = 'rate_limited'")}
    assert limited
    attempts = dict(query(workdir, "SELECT request_key, attempts FROM results"))
    assert {attempts[k] for k in limited} == {1}


def test_quota_exhausted_pauses_the_run_and_keeps_rows_pending(workdir, fake):
    fake.configure(quota_exhausted=True)
    spec = spec_with_attempts(workdir, rows=4, attempts=3)
    outcome = api.apply(spec, handle_signals=False)
    assert outcome.status == "paused"
    assert query(workdir, "SELECT count(*) FROM results WHERE status = 'succeeded'")[0][0] == 0
    fake.configure(quota_exhausted=False)
    fake.reset()
    assert api.apply(spec, handle_signals=False).status == "succeeded"
    assert fake.stats()["answered"] == 4


def test_a_row_whose_error_arrives_after_the_run_stopped_stays_pending(workdir, fake):
    """Row 2 ends the run (quota) at once; row 1's connection drops a second later. Row 1 could be
    asked again, so it must stay pending for the next apply, not be reported failed."""
    fake.configure(fail_matching={"review number 1": "timeout", "review number 2": "quota"}, timeout_hold_s=1.0)
    spec = spec_with_attempts(workdir, rows=3, attempts=3)
    outcome = api.apply(spec, handle_signals=False)
    assert outcome.failed == 0 and outcome.succeeded <= 1 and "quota" in (outcome.stop_reason or "")
    assert query(workdir, "SELECT count(*) FROM results WHERE status = 'failed'") == [(0,)]
    outcomes = [o for (o,) in query(workdir, "SELECT outcome FROM attempts ORDER BY 1")]
    assert outcomes == ["ok", "provider_unavailable", "quota_exhausted"]  # the dropped call recorded too
    fake.configure(fail_matching={})
    again = api.apply(spec, handle_signals=False)
    assert (again.status, again.succeeded, again.failed) == ("succeeded", 2, 0)  # row 0 came from the cache


@pytest.mark.parametrize(
    "provider,model", [("openai", "gpt-4.1-mini"), ("anthropic", "claude-haiku-4-5"), ("gemini", "gemini-2.5-flash")]
)
def test_a_billed_answer_whose_body_is_not_json_is_recorded_at_an_estimate_and_retried(workdir, fake, provider, model):
    fake.configure(fail_matching={"review number 1": "garbled"})
    spec = make_spec(
        workdir,
        rows=3,
        provider=provider,
        model=model,
        limits={"concurrency": 4, "max_attempts": 2, "request_timeout_s": 10},
    )
    outcome = api.apply(spec, handle_signals=False)
    assert (outcome.status, outcome.succeeded, outcome.failed) == ("partial", 2, 1)
    assert fake.stats()["faults"]["garbled"] == 2  # asked max_attempts times, each answered (billed)
    garbled = query(
        workdir, "SELECT outcome, status_code, estimated, cost_usd, output_tokens FROM attempts WHERE outcome <> 'ok'"
    )
    assert len(garbled) == 2
    assert all(o == "provider_unavailable" and s == 200 and e and c > 0 and t > 0 for o, s, e, c, t in garbled)
    total = query(workdir, "SELECT sum(cost_usd) FROM attempts")[0][0]
    assert outcome.cost_usd == pytest.approx(total)
    failed = query(workdir, "SELECT error_code, attempts, cost_usd FROM results WHERE status = 'failed'")
    assert failed[0][:2] == ("provider_unavailable", 2) and failed[0][2] == pytest.approx(sum(g[3] for g in garbled))
