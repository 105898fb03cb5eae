"""What the fake's answers cost, priced from its usage tally (``Stats.usage``, cache.py) with
genai-prices' own rates, independently of batchor's price code: the bill a test compares the
ledger with. Batch rows at the table's batch rates, flex calls at its flex rates; cache reads,
5-minute and 1-hour writes at their own rates (a missing rate: the input rate). Gemini context
caches: their tokens once at the input rate when made, and storage per token-hour at Gemini's
storage price (its pricing page: $4.50 per million token-hours on the Pro models, $1 on the
others) for the time each was held, a live one until it expires (what Gemini bills if nobody
deletes it)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

_TABLE_IDS = {"gemini": "google", "bedrock": "aws"}
_STORAGE_PER_MTOK_HOUR = (("gemini-2.5-pro", 4.5), ("gemini-3-pro", 4.5), ("gemini", 1.0))


def fake_bill(stats: dict[str, Any]) -> float:
    """USD for every answer and context cache the fake billed since its counters were last reset."""
    answers = sum(usage_bill(key, usage) for key, usage in stats["usage"].items())
    return answers + context_bill(stats)


def context_bill(stats: dict[str, Any]) -> float:
    """USD for the Gemini context caches alone: made, stored, and (live ones) held to their expiry."""
    made = sum(_rates(key)["input"] * usage.get("context_create", 0) / 1e6 for key, usage in stats["usage"].items())
    stored = sum(
        storage_bill(key, usage.get("context_storage_token_hours", 0.0)) for key, usage in stats["usage"].items()
    )
    held = sum(storage_bill(c["key"], c["storage_token_hours"]) for c in stats.get("contexts_held", []))
    return made + stored + held


def storage_bill(key: str, token_hours: float) -> float:
    model = key.split("|")[1]
    if not token_hours:
        return 0.0
    return token_hours * next(usd for prefix, usd in _STORAGE_PER_MTOK_HOUR if model.startswith(prefix)) / 1e6


def usage_bill(key: str, usage: dict[str, Any]) -> float:
    """USD for the answers of one provider|model|mode|tier."""
    return sum(usage[kind] * rate for kind, rate in _rates(key).items()) / 1_000_000


def _rates(key: str) -> dict[str, float]:
    from genai_prices import data_snapshot

    provider, model, mode, tier = key.split("|")
    _, info = data_snapshot.get_snapshot().find_provider_model(model, None, _TABLE_IDS.get(provider, provider), None)
    context = {"processing": "batch"} if mode == "batch" else {"service_tier": "flex"} if tier == "flex" else None
    prices = info.get_prices(datetime.now(UTC), context)
    rate_in = _rate(prices.input_mtok)
    return {
        "input": rate_in,
        "cache_read": _rate(prices.cache_read_mtok, rate_in),
        "cache_write": _rate(prices.cache_write_mtok, rate_in),
        "cache_write_1h": _rate(prices.cache_write_1h_mtok, rate_in),
        "output": _rate(prices.output_mtok),
    }


def _rate(value: Any, default: float = 0.0) -> float:
    return default if value is None else float(getattr(value, "base", value))
