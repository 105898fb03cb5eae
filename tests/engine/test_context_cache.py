"""Gemini explicit context caches end to end against the fake over HTTP: `cache: {explicit: true}`
puts a realtime step's system prompt in one context cache, every request reads it (the first ones
too, which the implicit cache misses), the run deletes it, the plan prices its creation and
storage; other providers are refused at `validate` (batch steps: test_batch_context_cache.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
import yaml

from batchor import api, operations
from batchor.errors import ExplicitCacheUnsupportedError, SpecProblemsError
from batchor.plan.context_cache import explicit_usd
from batchor.plan.prices import ModelPrice
from tests.engine.batch_helpers import FAST
from tests.engine.test_prompt_cache import STATE, cached_spec, ledger
from tests.fakes.bill import context_bill, fake_bill


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
    extra = explicit_usd(step, ModelPrice.from_dict(step.price or {}), step.counts.to_run)
    assert extra > 0 and step.counts.cost_upper > extra  # creation and an hour of storage, in both
    assert api.apply(spec, handle_signals=False).succeeded == 12
    caches = fake.stats()["context_caches"]
    assert caches["created"] == 1 and caches["deleted"] == 1 and caches["storage_token_hours"] > 0
    with duckdb.connect(str(workdir / STATE), read_only=True) as db:
        hits = db.execute("SELECT count(*) FILTER (WHERE cache_read_tokens >= 1024), count(*) FROM attempts").fetchone()
    assert hits == (12, 12)  # the implicit cache misses the requests in flight before the first answer
    _, _, answers, _ = ledger(workdir)
    spend = operations.runs(limit=1)[0]["spend"]  # the answers and the cache's creation and storage
    # Storage is billed by the second, until the delete call: the ledger's clock reads it when the
    # call returns, the fake's when it arrives; a few seconds apart on a busy machine.
    seconds = step.prompt_cache.system_tokens * 10 / 3600 / 1e6  # ten seconds of storage
    assert spend["caches_held"] == 1 and context_bill(fake.stats()) > 0
    assert spend["cache_fees_usd"] == pytest.approx(context_bill(fake.stats()), abs=seconds)
    assert spend["total_usd"] == pytest.approx(answers + spend["cache_fees_usd"], rel=1e-12)
    assert spend["total_usd"] == pytest.approx(fake_bill(fake.stats()), abs=seconds)
    assert "1 context cache held $0.0007 (made and stored)" in batchor_cli(workdir, "status").stdout
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


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_explicit_caches_elsewhere_are_refused_at_validate(workdir, provider):
    spec = explicit_spec(workdir, provider, rows=2)
    with pytest.raises((ExplicitCacheUnsupportedError, SpecProblemsError)) as caught:
        api.validate(spec)
    assert [p.code for p in getattr(caught.value, "problems", [caught.value])] == ["explicit_cache_unsupported"]
    assert "cache.explicit" in str(caught.value)


@pytest.mark.slow  # a process of its own, killed
def test_a_run_killed_while_holding_a_cache_has_recorded_its_fee_until_it_expires(workdir, fake):
    """kill -9 leaves the cache to expire: Gemini bills its storage for the whole hour, and the
    ledger recorded that when the cache was made, before any request read it."""
    fake.configure(latency_ms=300)
    spec = explicit_spec(workdir, rows=40, concurrency=2)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen([sys.executable, "-m", "batchor.cli.main", "apply", str(spec), "--yes"], env=env)
    deadline = time.monotonic() + 60
    while not fake.stats()["context_caches"].get("created") and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    stats = fake.stats()
    assert stats["context_caches"]["created"] == 1 and not stats["context_caches"].get("deleted")
    with duckdb.connect(str(workdir / STATE), read_only=True) as db:
        (deleted, held_s), *others = db.execute("SELECT deleted, held_until_s - created_s FROM cache_fees").fetchall()
    assert not others and not deleted and held_s == pytest.approx(3600, abs=1)
    spend = operations.runs(limit=1)[0]["spend"]
    assert spend["caches_held"] == 1 and spend["cache_fees_usd"] == pytest.approx(context_bill(stats), rel=1e-6)


@pytest.mark.parametrize("concurrency, used", [(2, True), (1, False)])
def test_auto_uses_a_context_cache_where_the_reads_it_adds_pay_for_it(workdir, fake, concurrency, used):
    """With two requests in flight the implicit cache misses twice: reading those from a context
    cache saves more than making it costs (2,255 tokens at the input rate); with one, less."""
    spec = explicit_spec(workdir, rows=4, concurrency=concurrency)
    data = yaml.safe_load(spec.read_text())
    data["cache"] = {"explicit": "auto"}
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    cache = api.plan(spec, save=False).header.steps[0].prompt_cache
    assert cache is not None and cache.explicit is used
    assert (
        cache.explicit_note.startswith("used: " if used else "not used: ")
        and "to make and store" in cache.explicit_note
    )
    assert api.apply(spec, handle_signals=False).succeeded == 4
    assert fake.stats()["context_caches"].get("created", 0) == int(used)
    assert operations.runs(limit=1)[0]["spend"]["caches_held"] == int(used)


@pytest.mark.parametrize("rows, used", [(2, False), (60, True)])
def test_auto_on_a_batch_step_weighs_the_reads_against_hours_of_storage(workdir, rows, used):
    """A batch step's implicit cache is assumed to hit half its lines; a context cache makes every
    line read, for its creation and two hours of storage: worth it from a few dozen lines."""
    spec = explicit_spec(workdir, rows=rows, **{**FAST, "mode": "batch"})
    data = yaml.safe_load(spec.read_text())
    data["cache"] = {"explicit": "auto"}
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    cache = api.plan(spec, save=False).header.steps[0].prompt_cache
    assert cache is not None and cache.explicit is used and "for ~120 min" in cache.explicit_note


def test_unset_a_gemini_batch_step_gets_a_context_cache_where_it_pays_and_says_how_to_turn_it_off(workdir):
    """The default (`cache.explicit` unset) is `auto` on batch steps: 60 lines pay for the cache's
    two hours; `explicit: false` keeps the implicit cache and says nothing."""
    spec = explicit_spec(workdir, rows=60, **{**FAST, "mode": "batch"})
    data = yaml.safe_load(spec.read_text())
    del data["cache"]
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    cache = api.plan(spec, save=False).header.steps[0].prompt_cache
    assert cache is not None and cache.explicit and cache.explicit_note.startswith("used: ")
    assert "`cache: {explicit: false}` turns it off" in cache.explicit_note
    data["cache"] = {"explicit": False}
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    cache = api.plan(spec, save=False).header.steps[0].prompt_cache
    assert cache is not None and not cache.explicit and not cache.explicit_note and not cache.system_tokens
