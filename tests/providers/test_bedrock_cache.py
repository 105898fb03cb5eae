"""Bedrock prompt caching through Converse's `cachePoint` blocks against the fake: the point goes
where the step's shared prefix ends, only for models Bedrock caches and prefixes long enough for
them, the usage Bedrock reports (`cacheReadInputTokens`, `cacheWriteInputTokens`) is recorded and
priced at the table's cache rates (the fake's own bill), and a TTL Bedrock does not offer is
refused at validate."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
import yaml

from batchor import api
from batchor.errors import SpecError, SpecProblemsError
from batchor.providers.base import CacheControl, LLMRequest
from batchor.providers.bedrock.realtime import to_body
from tests.fakes.bill import fake_bill
from tests.providers.helpers import point_aws_at, provider_spec

HAIKU_45 = "us.anthropic.claude-haiku-4-5-20251001-v1:0"  # caches from 4,096 tokens
NOVA = "amazon.nova-micro-v1:0"  # from 1K
HAIKU_3 = "anthropic.claude-3-haiku-20240307-v1:0"  # no prompt caching on Bedrock
LONG_SYSTEM = "You label customer reviews. " + " ".join(f"Rule {i}: read the review closely." for i in range(700))
POINT = {"cachePoint": {"type": "default"}}


@pytest.fixture
def aws(fake, monkeypatch):
    point_aws_at(fake.url, monkeypatch)
    return fake


def cached_spec(folder: Path, model: str, rows: int = 8, **limits) -> Path:
    spec = provider_spec(folder, "bedrock", model, rows=rows)
    data = yaml.safe_load(spec.read_text())
    data["steps"]["classify"]["system"] = LONG_SYSTEM
    data["steps"]["classify"]["prompt"] = "Label this review.\n\nReview: {{ row.text }}"
    data["limits"].update(concurrency=1, **limits)
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    return spec


def ledger(folder: Path) -> tuple[int, int, float]:
    with duckdb.connect(str(folder / ".batchor" / "state.duckdb"), read_only=True) as db:
        row = db.execute(
            "SELECT coalesce(sum(cache_read_tokens), 0), coalesce(sum(cache_write_tokens), 0), "
            "coalesce(sum(cost_usd), 0) FROM attempts"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), float(row[2])


def test_the_point_splits_the_first_turn_after_its_shared_head():
    request = LLMRequest(
        "k",
        NOVA,
        ({"role": "system", "content": "Sys."}, {"role": "user", "content": "Head: the row"}),
        {"max_tokens": 10},
        cache=CacheControl("key", messages=1, chars=6),
    )
    body = to_body(request)
    assert body["system"] == [{"text": "Sys."}]
    assert body["messages"][0]["content"] == [{"text": "Head: "}, POINT, {"text": "the row"}]


def test_a_wholly_shared_system_prompt_gets_the_point_after_it():
    request = LLMRequest(
        "k",
        NOVA,
        ({"role": "system", "content": "Sys."}, {"role": "user", "content": "{{row}}"}),
        {"max_tokens": 10},
        cache=CacheControl("key", messages=1, chars=0),
    )
    assert to_body(request)["system"] == [{"text": "Sys."}, POINT]


@pytest.mark.parametrize("model", [pytest.param(HAIKU_45, marks=pytest.mark.slow), NOVA])
def test_cache_reads_and_writes_are_recorded_and_priced_as_the_fake_bills_them(aws, workdir, model):
    plan = api.plan(cached_spec(workdir, model), save=False)
    assert plan.header.steps[0].prompt_cache.sent
    assert api.apply(cached_spec(workdir, model), handle_signals=False).succeeded == 8
    read, write, spent = ledger(workdir)
    stats = aws.stats()
    assert read == stats["cache_read_tokens"] > 6 * 4096 and write == stats["cache_write_tokens"] > 0
    assert spent == pytest.approx(fake_bill(stats), rel=1e-9)
    head = stats["bodies"][0]["messages"][0]["content"]
    assert head[:2] == [{"text": "Label this review.\n\nReview: "}, POINT]


def test_a_model_bedrock_does_not_cache_gets_no_point(aws, workdir):
    plan = api.plan(cached_spec(workdir, HAIKU_3), save=False)
    cache = plan.header.steps[0].prompt_cache
    assert cache is not None and not cache.sent and "no prompt cache" in cache.note


def test_an_hour_long_cache_is_refused_at_validate(aws, workdir):
    spec = cached_spec(workdir, NOVA)
    data = yaml.safe_load(spec.read_text())
    data["cache"] = {"ttl": "1h"}
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises((SpecError, SpecProblemsError), match="5m"):
        api.validate(spec)
