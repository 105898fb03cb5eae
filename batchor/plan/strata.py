"""Post-stratified answer statistics: a pilot's answers weighted back to the rows they stand for.

A pilot whose top-up drew its rows where a `when:` on the row holds (batchor/pilot/strata.py) gave
the steps that run on every row more answers from those rows than their share: a plain mean of
them is biased wherever those rows answer longer or shorter than the others. Their rows' shares
are known exactly (the `when:` is decided on every row), so each stratum's answers are weighted to
its share: mean = p m_in + (1 - p) m_out. The interval follows the weighted estimate's own error,
p^2 s_in^2 / n_in + (1 - p)^2 s_out^2 / n_out, through an effective number of answers (Kish):
the weighted answers' variance over that error, at most the answers there are.

While a pilot plans the full job (`reweighing`), the estimate and the interval read the ledger's
pilot answers of those steps with this pilot's own part replaced by its post-stratified one
(`reweighed`); nothing is written to the state.
"""

from __future__ import annotations

import dataclasses
import math
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Iterator

from batchor.state.length_stats import KeyStats, OutputStats

# re-asks in stages (state/answer_stats.py): weighted like the answers
_STAGES = (
    "first_asks",
    "first_rejected",
    "first_failed",
    "reasks",
    "reasks_rejected",
    "reask_tokens",
    "reask_added_input",
    "first_truncated",
    "reasks_truncated",
)
_FIT = ("fit_answers", "fit_input", "fit_input_sq", "fit_output", "fit_output_sq", "fit_cross")  # plan/length_fit.py
_ADDITIVE = (
    "answers",
    "attempts",
    "answer_tokens",
    "answer_tokens_sq",
    "attempt_tokens",
    "requests",
    "answer_tokens_cu",
    "answer_logs",
    "answer_logs_sq",
    "answer_logs_cu",
    *_STAGES,
    *_FIT,
)
_COUNTS = ("answers", "attempts", "answer_tokens", "attempt_tokens", "requests", *_STAGES, "fit_answers")  # ints


@dataclass(frozen=True)
class Reweighting:
    """One length key's answers from this pilot, as drawn and post-stratified."""

    step: str  # the pilot's step that gave them
    raw: OutputStats  # as the ledger holds them (part of its `pilot` answers)
    weighted: OutputStats  # weighted to the stratum's share, counted as the effective answers
    share: float  # the stratum's share of all rows (exact: the `when:` is decided on every row)
    inside: int  # answers from rows where the `when:` holds
    outside: int  # answers from the other rows


_ACTIVE: ContextVar[dict[str, Reweighting] | None] = ContextVar("batchor_reweighting", default=None)


@contextmanager
def reweighing(reweightings: dict[str, Reweighting]) -> Iterator[None]:
    """While planning inside, the estimate reads these length keys' pilot answers post-stratified."""
    token = _ACTIVE.set(reweightings)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def reweighed(stats: dict[str, KeyStats]) -> dict[str, KeyStats]:
    """`stats` with the active pilot's answers replaced by their post-stratified statistics."""
    active = _ACTIVE.get()
    if not active:
        return stats
    out = dict(stats)
    for key, change in active.items():
        found = out.get(key)
        if found is None:
            continue
        pilot = found.by_kind.get("pilot", OutputStats())
        others = _scaled(pilot, 1.0, minus=change.raw)  # earlier pilots' answers of the same key
        mixed = change.weighted + others if others.answers > 0 else change.weighted
        out[key] = KeyStats({**found.by_kind, "pilot": mixed})
    return out


def post_stratified(inside: OutputStats, outside: OutputStats, share: float) -> OutputStats | None:
    """The answers weighted to the stratum's `share` of all rows, counted as their effective number
    (None without answers on a side that has rows: nothing to weight with)."""
    if share >= 1.0 or share <= 0.0:
        only = inside if share >= 1.0 else outside
        return only if only.answers else None
    if not inside.answers or not outside.answers:
        return None
    n = inside.answers + outside.answers
    weighted = _scaled(inside, share * n / inside.answers, exact=True) + _scaled(
        outside, (1 - share) * n / outside.answers, exact=True
    )
    error = (
        share**2 * _variance(inside, weighted) / inside.answers
        + (1 - share) ** 2 * _variance(outside, weighted) / outside.answers
    )
    effective = min(float(n), _variance(weighted, weighted) / error) if error > 0 else float(n)
    return _rounded(_scaled(weighted, max(2, round(effective)) / n, exact=True))


def _variance(stats: OutputStats, pooled: OutputStats) -> float:
    """A stratum's answer variance (the pooled one where it has fewer than two answers)."""
    source = stats if stats.answers >= 2 else pooled
    n, mean = source.answers, source.answer_tokens / source.answers if source.answers else 0.0
    if n < 2:
        return 0.0
    return max(0.0, (source.answer_tokens_sq - n * mean * mean) / (n - 1))


def _scaled(stats: OutputStats, factor: float, *, minus: OutputStats | None = None, exact: bool = False) -> OutputStats:
    """Every additive figure times `factor` (less `minus`'s); counts stay floats while `exact`."""
    values = {}
    for name in _ADDITIVE:
        value = getattr(stats, name) * factor - (getattr(minus, name) if minus is not None else 0)
        values[name] = value if exact or name not in _COUNTS else max(0, round(value))
    return dataclasses.replace(stats, **values)


def _rounded(stats: OutputStats) -> OutputStats:
    return dataclasses.replace(stats, **{name: int(math.floor(getattr(stats, name) + 0.5)) for name in _COUNTS})
