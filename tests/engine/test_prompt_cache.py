"""Provider prompt caching end to end against the fake over HTTP: the controls each provider needs
are sent for a step's shared prefix, the fake reports cache usage as the provider would, the
ledger prices reads and writes at their own rates (the fake's bill, priced independently from
genai-prices), the request key does not depend on caching, and `limits.prompt_cache: off` sends
no control."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
import yaml
from conftest import make_spec

from batchor import api
from batchor.errors import CacheRetentionUnsupportedError, SpecProblemsError
from batchor.plan.model import req_column
from tests.engine.batch_helpers import FAST
from tests.fakes.bill import fake_bill
from tests.fakes.cache import BATCH_COLD_EVERY

STATE = Path(".batchor") / "state.duckdb"
LONG_SYSTEM = "You label customer reviews. " + " ".join(f"Rule {i}: read the review closely." for i in range(260))
MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4.1-mini", "gemini": "gemini-2.5-flash"}


def cached_spec(folder: Path, provider: str, rows: int = 24, **changes) -> Path:
    spec = make_spec(folder, rows=rows, provider=provider, model=MODELS[provider], **changes)
    data = yaml.safe_load(spec.read_text())
    data["steps"]["classify"]["system"] = LONG_SYSTEM
    data["steps"]["classify"]["prompt"] = "Label this review.\n\nReview: {{ row.text }}"
    data["limits"]["concurrency"] = 2
    data["limits"].update(changes.get("limits") or {})
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    return spec


def ledger(workdir: Path) -> tuple[int, int, float, float]:
    with duckdb.connect(str(workdir / STATE), read_only=True) as db:
        row = db.execute(
            "SELECT coalesce(sum(cache_read_tokens), 0), coalesce(sum(cache_write_tokens), 0), "
            "coalesce(sum(cost_usd), 0), coalesce(sum(uncached_usd - cost_usd), 0) FROM attempts"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), float(row[2]), float(row[3])


@pytest.mark.parametrize("provider", ["anthropic", "openai", "gemini"])
def test_cache_reads_are_recorded_and_priced_as_the_fake_bills_them(workdir, fake, provider):
    spec = cached_spec(workdir, provider)
    result = api.apply(spec, handle_signals=False)
    assert result.succeeded == 24
    read, write, spent, saved = ledger(workdir)
    stats = fake.stats()
    assert read == stats["cache_read_tokens"] > 20 * 1024  # all but the first few rows read the prefix
    assert write == stats["cache_write_tokens"]
    assert (write > 0) == (provider == "anthropic")  # only Anthropic bills (and reports) writes
    assert spent == pytest.approx(fake_bill(stats), rel=1e-9)
    assert saved > 0


def test_anthropic_gets_a_breakpoint_at_the_end_of_the_shared_prefix(workdir, fake):
    spec = cached_spec(workdir, "anthropic", rows=4)
    api.apply(spec, handle_signals=False)
    body = fake.stats()["bodies"][0]
    assert body["system"] == LONG_SYSTEM  # one breakpoint, after the prompt's literal head: it covers both
    head = body["messages"][0]["content"]
    assert head[0] == {"type": "text", "text": "Label this review.\n\nReview: ", "cache_control": {"type": "ephemeral"}}
    assert head[1]["text"].startswith("review number")


def test_openai_gets_one_prompt_cache_key_per_step(workdir, fake):
    api.apply(cached_spec(workdir, "openai", rows=4), handle_signals=False)
    keys = {body.get("prompt_cache_key") for body in fake.stats()["bodies"]}
    assert len(keys) == 1 and None not in keys


def test_prompt_cache_off_sends_no_control_and_keeps_the_request_keys(workdir, fake):
    on = api.plan(cached_spec(workdir, "anthropic", rows=6), save=False)
    off_spec = cached_spec(workdir, "anthropic", rows=6, limits={"prompt_cache": "off"})
    off = api.plan(off_spec, save=False)
    assert on.header.steps[0].prompt_cache.sent and not off.header.steps[0].prompt_cache.sent
    column = [req_column("classify", "key")]
    keys = [b.column(0).to_pylist() for b in on.iter_batches(column)]
    keys_off = [b.column(0).to_pylist() for b in off.iter_batches(column)]
    assert len(keys[0]) == 6
    assert keys == keys_off  # the answer does not depend on the cache: same request, same key
    api.apply(off_spec, handle_signals=False)
    stats = fake.stats()
    assert stats["cache_read_tokens"] == stats["cache_write_tokens"] == 0
    assert isinstance(stats["bodies"][0]["system"], str)


def test_a_short_prefix_sends_no_control(workdir, fake):
    spec = make_spec(workdir, rows=3, provider="anthropic", model="claude-sonnet-4-5")
    plan = api.plan(spec, save=False)
    cache = plan.header.steps[0].prompt_cache
    assert cache is not None and not cache.sent and "1,024 tokens" in cache.note


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_batch_lines_carry_the_controls_and_are_billed_at_batch_cache_prices(workdir, fake, provider):
    spec = cached_spec(workdir, provider, rows=16, limits={**FAST, "concurrency": 2})
    data = yaml.safe_load(spec.read_text())
    data["limits"]["mode"] = "batch"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    result = api.apply(spec, handle_signals=False)
    assert result.succeeded == 16
    read, _, spent, _ = ledger(workdir)
    stats = fake.stats()
    assert read == stats["cache_read_tokens"] > 0
    assert spent == pytest.approx(fake_bill(stats), rel=1e-9)


def test_openai_batch_lines_carry_the_step_cache_key_so_warm_workers_hit(workdir, fake):
    # Without the key the fake spreads a batch's rows over its machines as OpenAI may, and each
    # machine's first row misses: the pilot of a batch job then under-measures its hit share.
    spec = cached_spec(workdir, "openai", rows=16, limits={**FAST, "concurrency": 2, "mode": "batch"})
    assert api.apply(spec, handle_signals=False).succeeded == 16
    with duckdb.connect(str(workdir / STATE), read_only=True) as db:
        row = db.execute("SELECT count(*) FILTER (WHERE cache_read_tokens > 0) FROM attempts").fetchone()
    assert row is not None and row[0] == 16 - 16 // BATCH_COLD_EVERY  # only the rows meeting a cold worker miss


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_a_pilot_teaches_the_plan_the_hit_rate(workdir, fake):
    from batchor.pilot import run_pilot

    spec = cached_spec(workdir, "anthropic", rows=150)
    before = api.plan(spec, save=False).header.steps[0]
    piloted = run_pilot(spec, 10, seed=0, handle_signals=False)
    step = piloted.plan.header.steps[0]
    assert before.prompt_cache.source == "assumed" and step.prompt_cache.source == "history: 1 runs"
    assert 1 <= (step.prompt_cache.misses_per_run or 0) <= 2  # concurrency 2: the rows in flight before the first write
    rest = api.apply_compiled(piloted.plan, handle_signals=False)
    # within 10 %: the plan expects the rest's first rows to write the prefix again; run right after
    # the pilot, they find it still cached (one write of 2,262 tokens is 6 % of this rest's cost)
    assert rest.cost_usd == pytest.approx(piloted.plan.header.totals.cost_expected, rel=0.1)
    assert rest.cost_usd < piloted.plan.header.totals.cost_upper / 3  # the bound assumes no hit


def test_status_runs_and_show_say_what_caching_did(workdir, fake, batchor_cli):
    spec = cached_spec(workdir, "anthropic", rows=6)
    shown = batchor_cli(workdir, "show", str(spec), "--prompts", "1")
    assert "cache_control breakpoint (5m)" in shown.stdout
    assert 'shared prefix ends after: "' in shown.stdout and 'Review: "' in shown.stdout
    api.apply(spec, handle_signals=False)
    _, _, _, saved = ledger(workdir)
    status = batchor_cli(workdir, "status")
    assert f"saved by prompt caching ${saved:.4f}"[:30] in status.stdout
    assert "saved by prompt caching" in batchor_cli(workdir, "runs").stdout


def test_24h_retention_is_sent_to_models_that_offer_it_and_refused_at_validate_elsewhere(workdir, fake):
    spec = cached_spec(workdir, "openai", rows=2)
    data = yaml.safe_load(spec.read_text())
    data["cache"] = {"ttl": "24h"}
    for model in ("gpt-4.1-mini", "gpt-5-mini", "gpt-4o"):
        data["model"]["name"] = model
        spec.write_text(yaml.safe_dump(data, sort_keys=False))
        with pytest.raises((CacheRetentionUnsupportedError, SpecProblemsError)) as caught:
            api.validate(spec)
        assert [p.code for p in getattr(caught.value, "problems", [caught.value])] == ["cache_retention_unsupported"]
        assert f"openai:{model}" in str(caught.value) and "cache.ttl" in str(caught.value)
    data["model"]["name"] = "gpt-4.1"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    assert api.apply(spec, handle_signals=False).succeeded == 2
    assert {body.get("prompt_cache_retention") for body in fake.stats()["bodies"]} == {"24h"}
