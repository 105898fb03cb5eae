"""A realtime call whose connection drops: after the status line (the provider answered, so it
billed) the attempt is recorded at an estimate marked `estimated`, like a 200 whose body is not
JSON; before any response it is recorded at $0. Either way the budget counts the call at its
worst case, so `--max-cost` holds whatever the provider billed."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
import yaml
from conftest import make_spec

from batchor import api

STATE = Path(".batchor") / "state.duckdb"
PROVIDERS = [("openai", "gpt-4.1-mini"), ("anthropic", "claude-haiku-4-5"), ("gemini", "gemini-2.5-flash")]


def query(workdir: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(workdir / STATE), read_only=True) as db:
        return db.execute(sql).fetchall()


@pytest.mark.parametrize("provider,model", PROVIDERS)
def test_a_connection_dropped_mid_answer_is_recorded_at_an_estimate_and_one_dropped_before_at_nothing(
    workdir, fake, provider, model
):
    # row 1: headers and half the body, then the connection drops; row 2: read, then dropped unanswered
    fake.configure(fail_matching={"review number 1": "cut", "review number 2": "timeout"}, timeout_hold_s=0.05)
    spec = make_spec(
        workdir,
        rows=3,
        provider=provider,
        model=model,
        limits={"concurrency": 4, "max_attempts": 2, "request_timeout_s": 10},
    )
    outcome = api.apply(spec, handle_signals=False)
    assert (outcome.status, outcome.succeeded, outcome.failed) == ("partial", 1, 2)
    assert fake.stats()["faults"]["cut"] == 2
    failed = query(
        workdir,
        "SELECT outcome, estimated, cost_usd, output_tokens, error FROM attempts WHERE outcome <> 'ok' ORDER BY error",
    )
    cut = [f for f in failed if "in the middle of the response" in f[4]]
    dropped = [f for f in failed if f not in cut]
    assert len(cut) == 2 and len(dropped) == 2, failed
    assert all(o == "provider_unavailable" and e and c > 0 and t > 0 for o, e, c, t, _ in cut)
    assert all(not e and c == 0 and t == 0 for _, e, c, t, _ in dropped)
    assert outcome.cost_usd == pytest.approx(query(workdir, "SELECT sum(cost_usd) FROM attempts")[0][0])


def test_answers_cut_in_transit_count_at_their_worst_case_against_the_budget(fake, workdir):
    spec = make_spec(workdir, rows=4)
    data = yaml.safe_load(spec.read_text())
    data["limits"].update(max_attempts=6, concurrency=4)
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    plan = api.plan(spec, save=False)
    per_call = plan.header.totals.cost_upper / 4  # one attempt of each row at its worst case
    budget = per_call * 4 * 1.5
    fake.configure(fail_matching={"review number": "cut"})  # every call runs and is billed, its answer cut
    result = api.apply(spec, max_cost=budget, handle_signals=False)
    calls = fake.stats()["requests"]
    assert calls * per_call <= budget * (1 + 1e-9), f"{calls} calls may have cost {calls * per_call} > {budget}"
    assert result.status == "budget" and result.succeeded == 0
    estimated = query(workdir, "SELECT count(*), bool_and(estimated), min(cost_usd) FROM attempts")[0]
    assert estimated[0] == calls and estimated[1] and estimated[2] > 0


# Where each provider's batch results are downloaded (the fake's endpoint names).
DOWNLOADS = {
    "openai": "openai.files.content",
    "anthropic": "anthropic.batches.results",
    "gemini": "gemini.files.download",
}


@pytest.mark.parametrize("provider,model", PROVIDERS)
def test_a_batch_results_download_cut_in_transit_is_read_again_and_bills_nothing(
    workdir, fake, provider, model, monkeypatch
):
    """A download is free (the batch's lines carry the bill): a cut one is retried like any dropped
    connection, each answer stored once. Anthropic's results are read as a stream, after the SDK's
    call returned: the cut came through as a raw transport error (a traceback, the run left running)."""
    from batchor.engine import batch_calls

    async def instant(delay: float) -> None:
        return None

    monkeypatch.setattr(batch_calls, "default_sleep", instant)
    fake.configure(fault_plan={DOWNLOADS[provider]: ["cut"]})
    spec = make_spec(
        workdir,
        rows=3,
        provider=provider,
        model=model,
        limits={"mode": "batch", "batch_poll_s": 0.01, "batch_poll_max_s": 0.05, "max_attempts": 3},
    )
    if provider == "gemini":  # results through a file (inline ones come with the job)
        data = yaml.safe_load(spec.read_text())
        data["model"]["options"] = {"batch_inline_max_bytes": 100}
        spec.write_text(yaml.safe_dump(data, sort_keys=False))
    outcome = api.apply(spec, handle_signals=False)
    assert (outcome.status, outcome.succeeded) == ("succeeded", 3)
    assert fake.stats()["faults"][f"{DOWNLOADS[provider]}:cut"] == 1
    assert query(workdir, "SELECT count(*), bool_or(estimated) FROM attempts") == [(3, False)]


def test_embedding_answers_cut_in_transit_count_at_their_worst_case_against_the_budget(fake, workdir):
    """An embedding call's texts go in one call: a cut answer bills them all (each recorded at an
    estimate); the reservation was kept for the next try, so every try was sent on one reservation."""
    from tests.providers.test_embeddings_http import embed_job, texts

    spec = embed_job(workdir, texts(10))
    per_call = api.plan(spec, save=False).header.totals.cost_upper  # the ten texts go in one call
    budget = per_call * 1.5
    fake.configure(fault_plan={"openai.embeddings": ["cut"] * 3})
    outcome = api.apply(spec, max_cost=budget, handle_signals=False)
    calls = fake.stats()["endpoint_calls"]["openai.embeddings"]
    assert calls * per_call <= budget * (1 + 1e-9), f"{calls} calls may have cost {calls * per_call} > {budget}"
    assert outcome.status == "budget" and outcome.cost_usd > 0
    assert query(workdir, "SELECT count(*), bool_and(estimated) FROM attempts") == [(10 * calls, True)]
