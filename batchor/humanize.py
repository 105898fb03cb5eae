"""Values as people read them: money as money, times as durations, counts with separators, no `None`.

One place for it, so `status`, `runs`, `prices`, the live view and the HTML report agree. The
machine outputs (`--json`) never go through here.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

NOTHING = "-"


def money(value: float | None, *, estimated: bool = False) -> str:
    """$0.0017, $12.40, $1,234.56; sub-cent amounts keep 4 significant decimals ($0.000012); never
    scientific notation (1e-05 is $0.00001)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NOTHING
    sign = "~" if estimated else ""
    if value == 0:
        return f"{sign}$0"
    if abs(value) >= 1:
        return f"{sign}${value:,.2f}"
    if abs(value) >= 0.0001:
        return f"{sign}${value:.4f}"
    # Below a millionth of a dollar: two significant digits, still as a decimal ($0.000000012).
    decimals = max(6, 1 - math.floor(math.log10(abs(value))))
    return f"{sign}${value:.{decimals}f}".rstrip("0")


def per_mtok(value: float | None) -> str:
    """A price per million tokens: $0.40, $15.00, $0.075."""
    if value is None:
        return NOTHING
    if round(value, 2) == value:
        return f"${value:,.2f}"
    return "$" + f"{value:,.4f}".rstrip("0")


def duration(seconds: float | None) -> str:
    """0.4s, 12.3s, 4m 05s, 2h 07m, 3d 4h."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)) or seconds < 0:
        return NOTHING
    if seconds < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{seconds:.0f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h"


def millis(ms: float | None) -> str:
    """A latency: `7 ms`, `340 ms`, then as a duration (`1.2s`)."""
    if ms is None:
        return NOTHING
    return f"{ms:.0f} ms" if ms < 1000 else duration(ms / 1000.0)


def as_datetime(value: Any) -> dt.datetime | None:
    """A stored timestamp (datetime, or ISO text from JSON) as a naive local datetime."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None) if value.tzinfo is None else value.astimezone().replace(tzinfo=None)
    try:
        return as_datetime(dt.datetime.fromisoformat(str(value)))
    except ValueError:
        return None


def moment(value: Any) -> str:
    """A timestamp to the second (`2026-12-01 13:40:02`)."""
    when = as_datetime(value)
    return when.strftime("%Y-%m-%d %H:%M:%S") if when else NOTHING


def short_moment(value: Any, now: dt.datetime | None = None) -> str:
    """A timestamp in few characters: `13:40` today, `12-01 13:40` this year, else the date."""
    when = as_datetime(value)
    if when is None:
        return NOTHING
    today = (now or dt.datetime.now()).date()
    if when.date() == today:
        return when.strftime("%H:%M:%S")
    return when.strftime("%m-%d %H:%M" if when.year == today.year else "%Y-%m-%d")


def ago(value: Any, now: dt.datetime | None = None) -> str:
    """How long ago a timestamp was (`5m 02s ago`)."""
    when = as_datetime(value)
    if when is None:
        return NOTHING
    return duration(((now or dt.datetime.now()) - when).total_seconds()) + " ago"


def elapsed(start: Any, end: Any) -> float | None:
    """Seconds between two stored timestamps (None when either is missing)."""
    first, last = as_datetime(start), as_datetime(end)
    return None if first is None or last is None else (last - first).total_seconds()


def count(value: int | float | None) -> str:
    """1,234 (a missing count is `-`)."""
    if value is None:
        return NOTHING
    return f"{int(value):,}"


def plural(value: int, noun: str, verb: str = "") -> str:
    """`1 row`, `2 rows`; with a verb in its plural form, `1 row shares`, `2 rows share`."""
    one = int(value) == 1
    words = f"{int(value):,} {noun if one else noun + 's'}"
    return f"{words} {verb + 's' if one else verb}" if verb else words


def percent(part: float, whole: float) -> str:
    """12.5 % (nothing of nothing is `-`)."""
    return NOTHING if not whole else f"{100.0 * part / whole:.1f} %"


def cell(value: Any) -> str:
    """Any value for a table cell: None as `-`, floats shortened, lists and dicts compact."""
    if value is None:
        return NOTHING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, dict):
        return ", ".join(f"{k} {cell(v)}" for k, v in value.items()) or NOTHING
    if isinstance(value, (list, tuple)):
        return ", ".join(cell(v) for v in value) or NOTHING
    return str(value)


def cache_saving(saved: float | None, lead: str = "; ") -> str:
    """`; saved by prompt caching $X` (or what cache writes cost above what it saved), or nothing."""
    if not saved:
        return ""
    if saved > 0:
        return f"{lead}saved by prompt caching {money(saved)}"
    return f"{lead}prompt-cache writes cost {money(-saved)} more than the cache saved"


def cache_fees(spend: dict[str, Any], lead: str = "; ") -> str:
    """`; 1 context cache held $0.0021 (made and stored)`: the fees of caches billed apart from the
    requests (Gemini explicit context caches; part of the spend), or nothing."""
    held = int(spend.get("caches_held") or 0)
    if not held:
        return ""
    caches = f"{held} context cache{'s' if held > 1 else ''}"
    return f"{lead}{caches} held {money(spend.get('cache_fees_usd'))} (made and stored)"


def models_worth_showing(models: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A run's calls and spend per step and model (`StateStore.run_model_spend`), when some step was
    answered by more than one model (a fallback, an escalation), else none: with one model per
    step, the steps' own lines already say whose the spend was. `status`, the markdown report and
    the HTML report all show the table under this one rule."""
    steps = [m["step"] for m in models]
    return models if len(steps) != len(set(steps)) else []
