"""What the fake's answers cost, priced from its usage tally (``Stats.usage``, cache.py) with
genai-prices' own rates, independently of batchor's price code: the bill a test compares the
ledger with. Batch rows at the table's batch rates, flex calls at its flex rates; cache reads,
5-minute and 1-hour writes at their own rates (a missing rate: the input rate)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

_TABLE_IDS = {"gemini": "google", "bedrock": "aws"}


def fake_bill(stats: dict[str, Any]) -> float:
    """USD for every answer the fake billed since its counters were last reset."""
    return sum(usage_bill(key, usage) for key, usage in stats["usage"].items())


def usage_bill(key: str, usage: dict[str, int]) -> float:
    from genai_prices import data_snapshot

    provider, model, mode, tier = key.split("|")
    _, info = data_snapshot.get_snapshot().find_provider_model(model, None, _TABLE_IDS.get(provider, provider), None)
    context = {"processing": "batch"} if mode == "batch" else {"service_tier": "flex"} if tier == "flex" else None
    prices = info.get_prices(datetime.now(UTC), context)
    rate_in = _rate(prices.input_mtok)
    rates = {
        "input": rate_in,
        "cache_read": _rate(prices.cache_read_mtok, rate_in),
        "cache_write": _rate(prices.cache_write_mtok, rate_in),
        "cache_write_1h": _rate(prices.cache_write_1h_mtok, rate_in),
        "output": _rate(prices.output_mtok),
    }
    return sum(usage[kind] * rate for kind, rate in rates.items()) / 1_000_000


def _rate(value: Any, default: float = 0.0) -> float:
    return default if value is None else float(getattr(value, "base", value))
