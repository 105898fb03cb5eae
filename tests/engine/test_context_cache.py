"""Gemini explicit context caches end to end against the fake over HTTP: `cache: {explicit: true}`
puts a realtime step's system prompt in one context cache, every request reads it (the first ones
too, which the implicit cache misses), the run deletes it, the plan prices its creation and
storage; other providers and batch-mode steps are refused at `validate`."""

from __future__ import annotations

import duckdb
import pytest
import yaml

from batchor import api
from batchor.errors import ExplicitCacheUnsupportedError, SpecProblemsError
from batchor.plan.context_cache import explicit_usd
from batchor.plan.prices import ModelPrice
from tests.engine.batch_helpers import FAST
from tests.engine.test_prompt_cache import STATE, cached_spec, ledger
from tests.fakes.bill import fake_bill


def explicit_spec(workdir, provider="gemini", rows=12, **limits):
    spec = cached_spec(workdir, provider, rows=rows, limits=limits)
    data = yaml.safe_load(spec.read_text())
    data["cache"] = {"explicit": True}
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    return spec


def test_every_request_reads_the_context_cache_and_the_run_deletes_it(workdir, fake, batchor_cli):
    spec = explicit_spec(workdir)
    assert "explicit context cache of the system prompt" in batchor_cli(workdir, "show", str(spec)).stdout
    plan = api.plan(spec, save=False)
    step = plan.header.steps[0]
    assert step.prompt_cache is not None and step.prompt_cache.explicit and step.prompt_cache.system_tokens > 1024
    extra = explicit_usd(step, ModelPrice.from_dict(step.price or {}))
    assert extra > 0 and step.counts.cost_upper > extra  # creation and an hour of storage, in both
    assert api.apply(spec, handle_signals=False).succeeded == 12
    caches = fake.stats()["context_caches"]
    assert caches["created"] == 1 and caches["deleted"] == 1 and caches["storage_token_hours"] > 0
    with duckdb.connect(str(workdir / STATE), read_only=True) as db:
        hits = db.execute("SELECT count(*) FILTER (WHERE cache_read_tokens >= 1024), count(*) FROM attempts").fetchone()
    assert hits == (12, 12)  # the implicit cache misses the requests in flight before the first answer
    _, _, spent, _ = ledger(workdir)
    assert spent == pytest.approx(fake_bill(fake.stats()), rel=1e-9)
    bodies = fake.stats()["bodies"]
    assert all(b.get("cachedContent") and not b.get("systemInstruction") for b in bodies)


def test_a_cache_gemini_will_not_make_leaves_the_prompt_in_the_requests(workdir, fake):
    fake.configure(fault_plan={"gemini.caches.create": ["400"]})
    assert api.apply(explicit_spec(workdir, rows=4), handle_signals=False).succeeded == 4
    assert fake.stats()["endpoint_calls"]["gemini.caches.create"] == 1  # refused once, not asked again
    assert all(b.get("systemInstruction") and not b.get("cachedContent") for b in fake.stats()["bodies"])


def test_a_failed_create_is_retried_with_the_request(workdir, fake):
    fake.configure(fault_plan={"gemini.caches.create": ["503"]})
    assert api.apply(explicit_spec(workdir, rows=4, concurrency=1), handle_signals=False).succeeded == 4
    caches = fake.stats()["context_caches"]
    assert fake.stats()["endpoint_calls"]["gemini.caches.create"] == 2 and caches["created"] == caches["deleted"] == 1


@pytest.mark.parametrize("provider, limits", [("openai", {}), ("anthropic", {}), ("gemini", {**FAST, "mode": "batch"})])
def test_explicit_caches_elsewhere_are_refused_at_validate(workdir, provider, limits):
    spec = explicit_spec(workdir, provider, rows=2, **limits)
    with pytest.raises((ExplicitCacheUnsupportedError, SpecProblemsError)) as caught:
        api.validate(spec)
    assert [p.code for p in getattr(caught.value, "problems", [caught.value])] == ["explicit_cache_unsupported"]
    assert "cache.explicit" in str(caught.value)
