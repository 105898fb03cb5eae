"""Plan stage: a dated, offline price per model, so every plan states its cost before it runs.

Prices come from genai-prices' bundled snapshot (never its network updater), resolved for the
day the plan is made: dated price changes, batch and cached-input rates where it knows them.
A plan pins the resolved `ModelPrice` as JSON, so applying it later costs what it said.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from typing import Any

from batchor.humanize import per_mtok
from batchor.plan.price_cache import remembered
from batchor.providers import REGISTRY
from batchor.providers.facts import provider_facts, table_model

__all__ = [
    "BATCH_DISCOUNT",
    "LISTED_PROVIDERS",
    "ModelPrice",
    "list_prices",
    "lookup_price",
    "price_table_info",
    "table_provider_id",
]

BATCH_DISCOUNT = 0.5
"""Batch APIs of OpenAI, Anthropic and Gemini bill 50 % of realtime; assumed where unknown."""

_BATCH_PROVIDERS = frozenset(name for name, info in REGISTRY.items() if info.batch)  # with a Batch API of their own
_LOCAL_PROVIDERS = frozenset(name for name, info in REGISTRY.items() if info.self_hosted)  # no per-token bill
BARE_PROVIDERS = frozenset(name for name, info in REGISTRY.items() if info.bare)  # any server: no table price
_LISTED = tuple(name for name, info in REGISTRY.items() if info.prices)  # ProviderInfo.prices: the table's id
LISTED_PROVIDERS = _LISTED  # providers whose models the table lists
_BATCH_CONTEXT = {"processing": "batch"}
_FLEX_CONTEXT = {"service_tier": "flex"}


@dataclass(frozen=True)
class ModelPrice:
    """USD per million tokens for one model, as of one day; `None` means not offered/unknown."""

    provider: str
    model: str
    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float | None = None
    batch_input_per_mtok: float | None = None
    batch_output_per_mtok: float | None = None
    source: str = "spec"
    as_of: str = ""
    notes: tuple[str, ...] = ()
    batch_cached_input_per_mtok: float | None = None
    # Prompt-cache writes (Anthropic bills them above the input rate: 1.25x for 5 minutes, 2x for
    # an hour); None: written tokens cost what input does, or the provider's published multiple.
    cache_write_per_mtok: float | None = None
    cache_write_1h_per_mtok: float | None = None
    batch_cache_write_per_mtok: float | None = None
    batch_cache_write_1h_per_mtok: float | None = None
    # OpenAI's flex processing (`service_tier: flex`): None when the table has no flex price for
    # the model (the model has no flex tier); flex bills the Batch API's rates where unlisted.
    flex_input_per_mtok: float | None = None
    flex_output_per_mtok: float | None = None
    flex_cached_input_per_mtok: float | None = None

    def cost(
        self,
        input_tokens: int,
        output_tokens: int,
        *,
        batch: bool = False,
        cached_input_tokens: int = 0,
        cache_write_tokens: int = 0,
        cache_write_1h_tokens: int = 0,
        flex: bool = False,
    ) -> float:
        """USD for one usage. `cached_input_tokens` (read from the prompt cache) and
        `cache_write_tokens` (written to it, `cache_write_1h_tokens` of them for an hour) are parts of
        `input_tokens`; `flex`: OpenAI's flex tier."""
        rate_in, rate_out, rate_cached = self._rates(batch, flex)
        write_5m, write_1h = self._write_rates(batch, rate_in)
        cached = min(cached_input_tokens, input_tokens)
        writes = min(cache_write_tokens, input_tokens - cached)
        long = min(cache_write_1h_tokens, writes)
        fresh = input_tokens - cached - writes
        total = fresh * rate_in + cached * rate_cached + (writes - long) * write_5m + long * write_1h
        return (total + output_tokens * rate_out) / 1_000_000

    @property
    def has_flex(self) -> bool:
        """Whether the price table lists a flex tier for the model."""
        return self.flex_input_per_mtok is not None

    def _write_rates(self, batch: bool, rate_in: float) -> tuple[float, float]:
        """USD per MTok written to the prompt cache for 5 minutes and for an hour."""
        short, long = (
            (self.batch_cache_write_per_mtok, self.batch_cache_write_1h_per_mtok)
            if batch
            else (self.cache_write_per_mtok, self.cache_write_1h_per_mtok)
        )
        factors = provider_facts(self.provider).cache_write_factors  # where the table has no write price
        return _or(short, rate_in * factors[0]), _or(long, rate_in * factors[1])

    def _rates(self, batch: bool, flex: bool = False) -> tuple[float, float, float]:
        cached = self.cached_input_per_mtok
        if flex and not batch:
            rate_in, rate_out, _ = self._rates(True)
            return (
                _or(self.flex_input_per_mtok, rate_in),
                _or(self.flex_output_per_mtok, rate_out),
                _or(self.flex_cached_input_per_mtok, min(_or(cached, rate_in), rate_in)),
            )
        if not batch:
            return self.input_per_mtok, self.output_per_mtok, _or(cached, self.input_per_mtok)
        rate_in = _or(self.batch_input_per_mtok, self.input_per_mtok)
        rate_out = _or(self.batch_output_per_mtok, self.output_per_mtok)
        # Without a batch cache rate, a cache read never costs more than a batch input token.
        rate_cached = _or(self.batch_cached_input_per_mtok, min(_or(cached, rate_in), rate_in))
        return rate_in, rate_out, rate_cached

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["notes"] = list(self.notes)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelPrice:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["notes"] = tuple(values.get("notes", ()))
        return cls(**values)


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def lookup_price(
    provider: str,
    model: str,
    *,
    override: dict[str, Any] | None = None,
    at: datetime | None = None,
) -> ModelPrice | None:
    """The price of `model` on `provider` on the day of `at` (default today, UTC); None if unknown.

    A spec `override` wins over the table. `mock` and self-hosted servers cost nothing; a bare
    `openai-compatible` endpoint could be anything, so it needs an override.
    """
    day = _day(at)
    if override:
        return _with_batch_default(_override_price(provider, model, override, day))
    offline = provider_facts(provider).offline
    if offline or provider in _LOCAL_PROVIDERS:
        note = "mock provider" if offline else "self-hosted server: no per-token charge"
        source = "mock" if offline else "local"
        return ModelPrice(provider, model, 0.0, 0.0, 0.0, 0.0, 0.0, source, day.isoformat(), (note,))
    if provider in BARE_PROVIDERS:
        return None
    return _table_price(provider, model, day)


def table_provider_id(provider: str) -> str:
    """The price table's name for one of our providers."""
    info = REGISTRY.get(provider)
    return info.prices if info is not None and info.prices else provider


def _override_price(provider: str, model: str, override: dict[str, Any], day: date) -> ModelPrice:
    known = (
        "input_per_mtok",
        "output_per_mtok",
        "cached_input_per_mtok",
        "batch_input_per_mtok",
        "batch_output_per_mtok",
    )
    values: dict[str, Any] = {k: float(v) for k, v in override.items() if k in known and v is not None}
    return ModelPrice(provider, model, source="spec", as_of=day.isoformat(), **values)


@lru_cache(maxsize=1024)
def _table_price(provider: str, model: str, day: date) -> ModelPrice | None:
    """The table's price, kept on disk for the next plan (plan/price_cache.py)."""
    found = remembered(f"price|{provider}|{model}|{day.isoformat()}", lambda: _price_from_table(provider, model, day))
    return ModelPrice.from_dict(found) if found is not None else None


def _price_from_table(provider: str, model: str, day: date) -> dict[str, Any] | None:
    from genai_prices import data_snapshot

    ref = table_model(provider, model)
    try:
        _, info = data_snapshot.get_snapshot().find_provider_model(ref, None, table_provider_id(provider), None)
    except LookupError:
        return None
    price = _catalog_price(provider, model, info, day)
    return price.to_dict() if price is not None else None


def _catalog_price(provider: str, model: str, info: Any, day: date) -> ModelPrice | None:
    """Resolve a genai-prices ModelInfo for `day`; None when it has no per-token prices."""
    realtime = _resolve(info, day, None)
    if realtime["input_mtok"] is None or realtime["output_mtok"] is None:
        return None
    batch = _resolve(info, day, _BATCH_CONTEXT) if _has_variant(info, day, _BATCH_CONTEXT) else {}
    flex = _resolve(info, day, _FLEX_CONTEXT) if _has_variant(info, day, _FLEX_CONTEXT) else {}
    price = ModelPrice(
        provider,
        model,
        realtime["input_mtok"],
        realtime["output_mtok"],
        realtime["cache_read_mtok"],
        batch.get("input_mtok"),
        batch.get("output_mtok"),
        source=f"genai-prices {_version()}",
        as_of=day.isoformat(),
        notes=tuple(_notes(model, info, day)),
        batch_cached_input_per_mtok=batch.get("cache_read_mtok"),
        cache_write_per_mtok=realtime["cache_write_mtok"],
        cache_write_1h_per_mtok=realtime["cache_write_1h_mtok"],
        batch_cache_write_per_mtok=batch.get("cache_write_mtok"),
        batch_cache_write_1h_per_mtok=batch.get("cache_write_1h_mtok"),
        flex_input_per_mtok=flex.get("input_mtok"),
        flex_output_per_mtok=flex.get("output_mtok"),
        flex_cached_input_per_mtok=flex.get("cache_read_mtok"),
    )
    return _with_batch_default(price)


def _with_batch_default(price: ModelPrice) -> ModelPrice:
    """Fill unknown batch rates with the published 50 % discount, and say so."""
    if price.provider not in _BATCH_PROVIDERS or price.batch_input_per_mtok is not None:
        return price
    note = f"batch price assumed {BATCH_DISCOUNT:.0%} of realtime (not in the price table)"
    return replace(
        price,
        batch_input_per_mtok=price.input_per_mtok * BATCH_DISCOUNT,
        batch_output_per_mtok=price.output_per_mtok * BATCH_DISCOUNT,
        notes=(*price.notes, note),
    )


_KEYS = ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok", "cache_write_1h_mtok")


def _resolve(info: Any, day: date, context: dict[str, str] | None) -> dict[str, float | None]:
    """Rates on `day`; where a price varies by time of day, the day's highest rate (a bound)."""
    moments = _day_grid(day) if _time_of_day(info) else [_noon(day)]
    best: dict[str, float | None] = dict.fromkeys(_KEYS)
    for moment in moments:
        prices = info.get_prices(moment, context)
        for key in _KEYS:
            value = _base(getattr(prices, key, None))
            current = best[key]
            if value is not None and (current is None or value > current):
                best[key] = value
    return best


def _base(value: Any) -> float | None:
    """Decimal -> float; tiered prices -> their base rate (tiers are described in the notes)."""
    if value is None:
        return None
    return float(getattr(value, "base", value))


def _has_variant(info: Any, day: date, context: dict[str, str]) -> bool:
    return any(
        v.when == context and (v.constraint is None or v.constraint.active(_noon(day)))
        for v in info.price_variants or ()
    )


def _time_of_day(info: Any) -> bool:
    conditional = info.prices if isinstance(info.prices, list) else []
    return any(hasattr(c.constraint, "start_time") for c in conditional)


def _notes(model: str, info: Any, day: date) -> list[str]:
    ref = model.lower().removeprefix("models/")
    notes = [] if info.id.lower() == ref else [f"matched price-table model '{info.id}'"]
    if info.deprecated:
        notes.append("model is marked deprecated")
    if _time_of_day(info):
        notes.append("price varies by time of day (UTC); the day's highest rates are used")
    notes.extend(_tier_notes(info.get_prices(_noon(day))))
    notes.extend(_scheduled_notes(info, day))
    return notes


def _tier_notes(prices: Any) -> list[str]:
    notes = []
    for key, label in (("input_mtok", "input"), ("output_mtok", "output")):
        for tier in getattr(getattr(prices, key, None), "tiers", None) or ():
            notes.append(
                f"{label} is {per_mtok(float(tier.price))}/MTok for requests above {tier.start:,} input "
                "tokens (base rate used here)"
            )
    return notes


def _scheduled_notes(info: Any, day: date) -> list[str]:
    conditional = info.prices if isinstance(info.prices, list) else []
    notes = []
    for c in conditional:
        start = getattr(c.constraint, "start_date", None)
        if start is not None and start > day:
            rates = f"input {per_mtok(_base(c.prices.input_mtok))}, output {per_mtok(_base(c.prices.output_mtok))}"
            notes.append(f"price changes on {start.isoformat()} to {rates} per MTok")
    return notes


def _day(at: datetime | None) -> date:
    if at is None:
        return datetime.now(UTC).date()
    return (at.astimezone(UTC) if at.tzinfo else at).date()


def _noon(day: date) -> datetime:
    return datetime.combine(day, time(12), UTC)


def _day_grid(day: date) -> list[datetime]:
    start = datetime.combine(day, time(0), UTC)
    return [start + timedelta(minutes=15 * i) for i in range(96)]


def _version() -> str:
    from genai_prices import __version__

    return __version__


def list_prices(provider: str | None = None, query: str | None = None) -> list[ModelPrice]:
    """Table prices for today, for one provider (default: the providers batchor ships)."""
    from genai_prices import data_snapshot

    day, needle = _day(None), (query or "").lower()
    by_id = {p.id: p for p in data_snapshot.get_snapshot().providers}
    out: list[ModelPrice] = []
    for ours in (provider,) if provider else _LISTED:
        table = by_id.get(table_provider_id(ours))
        for info in table.models if table else ():
            if needle in info.id.lower() or needle in (info.name or "").lower():
                price = _catalog_price(ours, info.id, info, day)
                out.extend([price] if price else [])
    return sorted(out, key=lambda p: (p.provider, p.model))


def price_table_info() -> dict[str, Any]:
    """What the price table is and how fresh, for `batchor prices`."""
    from genai_prices import data_snapshot

    snapshot = data_snapshot.get_snapshot()
    today = _day(None)
    starts = sorted(
        getattr(c.constraint, "start_date")  # noqa: B009 - not every constraint kind has one
        for p in snapshot.providers
        for m in p.models
        if isinstance(m.prices, list)
        for c in m.prices
        if hasattr(c.constraint, "start_date")
    )
    return {
        "source": "genai-prices",
        "version": _version(),
        "offline": not snapshot.from_auto_update,
        "providers": len(snapshot.providers),
        "models": sum(len(p.models) for p in snapshot.providers),
        "latest_dated_change": _iso(max((d for d in starts if d <= today), default=None)),
        "next_scheduled_change": _iso(min((d for d in starts if d > today), default=None)),
        "provider_ids": {p: table_provider_id(p) for p in _LISTED},
        "batch_default": f"{BATCH_DISCOUNT:.0%} of realtime for {', '.join(sorted(_BATCH_PROVIDERS))}"
        " when the table has no batch price",
    }


def _iso(day: date | None) -> str | None:
    return day.isoformat() if day else None
