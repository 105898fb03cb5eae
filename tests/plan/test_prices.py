"""Offline, dated prices: table lookups, batch rates, spec overrides, cost arithmetic."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from batchor.plan.prices import ModelPrice, list_prices, lookup_price, price_table_info


@pytest.mark.parametrize(
    ("provider", "model"),
    [
        ("openai", "gpt-4o-mini"),
        ("openai", "gpt-4.1-mini-2025-04-14"),
        ("anthropic", "claude-sonnet-4-5"),
        ("gemini", "gemini-2.5-flash"),
        ("gemini", "models/gemini-2.5-flash"),
    ],
)
def test_known_models_have_prices_and_half_price_batch(provider, model):
    price = lookup_price(provider, model)
    assert price is not None
    assert price.input_per_mtok > 0 and price.output_per_mtok > 0
    assert price.batch_input_per_mtok == pytest.approx(price.input_per_mtok / 2, rel=0.01)
    assert price.batch_output_per_mtok == pytest.approx(price.output_per_mtok / 2, rel=0.01)
    assert price.source.startswith("genai-prices ")
    assert (price.provider, price.model) == (provider, model)


def test_known_values():
    price = lookup_price("openai", "gpt-4o-mini", at=datetime(2026, 11, 1, tzinfo=UTC))
    assert (price.input_per_mtok, price.output_per_mtok) == (0.15, 0.6)
    assert price.cached_input_per_mtok == 0.075
    assert price.as_of == "2026-11-01"


def test_dated_price_change():
    before = lookup_price("openai", "o3", at=datetime(2025, 1, 1))
    after = lookup_price("openai", "o3", at=datetime(2025, 7, 1))
    assert (before.input_per_mtok, after.input_per_mtok) == (10.0, 2.0)
    assert any("price changes on 2025-06-10" in note for note in before.notes)


def test_batch_default_is_noted_when_table_lacks_it():
    price = lookup_price("gemini", "gemini-2.0-flash")
    assert price.batch_input_per_mtok == pytest.approx(price.input_per_mtok * 0.5)
    assert any("batch price assumed 50%" in note for note in price.notes)


def test_override_wins():
    override = {"input_per_mtok": 1.0, "output_per_mtok": 2.0, "cached_input_per_mtok": 0.5}
    price = lookup_price("openai", "gpt-4o-mini", override=override)
    assert (price.source, price.input_per_mtok, price.output_per_mtok) == ("spec", 1.0, 2.0)
    assert price.cached_input_per_mtok == 0.5
    assert (price.batch_input_per_mtok, price.batch_output_per_mtok) == (0.5, 1.0)
    compat = lookup_price("openai-compatible", "my-llama", override=override)
    assert compat.source == "spec" and compat.batch_input_per_mtok is None
    explicit = {**override, "batch_input_per_mtok": 0.9, "batch_output_per_mtok": 1.9}
    assert lookup_price("openai", "x", override=explicit).batch_input_per_mtok == 0.9


@pytest.mark.parametrize(
    ("provider", "model"),
    [("openai", "no-such-model-xyz"), ("openai-compatible", "gpt-4o-mini"), ("nope", "gpt-4o")],
)
def test_unknown_is_none(provider, model):
    assert lookup_price(provider, model) is None


def test_mock_and_local_are_free():
    for provider in ("mock", "ollama"):
        price = lookup_price(provider, "anything")
        assert price.source == ("mock" if provider == "mock" else "local")
        assert price.cost(10**6, 10**6) == 0.0
        assert price.cost(10**6, 10**6, batch=True, cached_input_tokens=10) == 0.0


def test_compatible_presets_map_to_the_table():
    assert lookup_price("openrouter", "openai/gpt-4o-mini").input_per_mtok > 0
    grok = lookup_price("xai", "grok-4-fast")
    assert grok is not None and any("matched price-table model" in n for n in grok.notes)


def test_time_of_day_prices_use_the_days_highest_rate():
    price = lookup_price("deepseek", "deepseek-chat", at=datetime(2026, 11, 1, 2, 0))
    assert price.input_per_mtok == 0.27  # peak rate, although 02:00 UTC is in the peak window
    assert any("time of day" in note for note in price.notes)


def test_cost_arithmetic():
    price = ModelPrice(
        "openai",
        "m",
        2.0,
        8.0,
        cached_input_per_mtok=0.5,
        batch_input_per_mtok=1.0,
        batch_output_per_mtok=4.0,
    )
    assert price.cost(1_000_000, 500_000) == pytest.approx(2.0 + 4.0)
    assert price.cost(1_000_000, 500_000, batch=True) == pytest.approx(1.0 + 2.0)
    assert price.cost(1_000_000, 0, cached_input_tokens=400_000) == pytest.approx(1.2 + 0.2)
    # batch + cache without a batch cache rate: never more than a batch input token
    assert price.cost(1_000_000, 0, batch=True, cached_input_tokens=1_000_000) == pytest.approx(0.5)
    plain = ModelPrice("openrouter", "m", 2.0, 8.0)
    assert plain.cost(1_000_000, 1_000_000, batch=True, cached_input_tokens=500_000) == 10.0


def test_dict_round_trip_through_json():
    price = lookup_price("anthropic", "claude-sonnet-4-5")
    assert price.notes  # tiered long-context pricing is described
    data = json.loads(json.dumps(price.to_dict()))
    assert ModelPrice.from_dict(data) == price


def test_table_info_and_listing():
    info = price_table_info()
    assert info["source"] == "genai-prices" and info["version"]
    assert info["offline"] and info["models"] > 100
    assert info["provider_ids"]["gemini"] == "google"
    json.dumps(info)
    minis = list_prices("openai", "4o-mini")
    assert minis and all("4o-mini" in p.model and p.provider == "openai" for p in minis)
    assert {p.provider for p in list_prices(query="flash")} >= {"gemini"}
