"""Post-stratified pilot answers (plan/strata.py): the weighted mean, its effective answers, and the
ledger's pilot answers with this pilot's part replaced only while a pilot plans."""

from __future__ import annotations

import math

import pytest

from batchor.plan.strata import Reweighting, post_stratified, reweighed, reweighing
from batchor.state.length_stats import KeyStats, OutputStats


def stats(lengths: list[int]) -> OutputStats:
    return OutputStats(
        len(lengths),
        len(lengths),
        sum(lengths),
        float(sum(t * t for t in lengths)),
        sum(lengths),
        max(lengths),
        len(lengths),
        float(sum(t**3 for t in lengths)),
    )


def variance(lengths: list[int]) -> float:
    mean = sum(lengths) / len(lengths)
    return sum((t - mean) ** 2 for t in lengths) / (len(lengths) - 1)


def test_each_side_is_weighted_to_its_share_and_counted_as_its_effective_answers():
    inside, outside = [40, 44, 52, 38, 61, 47, 55, 42, 50, 49, 58, 36], [10, 12, 9, 14, 11, 8, 13, 10]
    weighted = post_stratified(stats(inside), stats(outside), 0.25)
    assert weighted is not None
    truth = 0.25 * sum(inside) / len(inside) + 0.75 * sum(outside) / len(outside)
    assert weighted.mean == pytest.approx(truth, rel=0.01)  # a plain mean of the 20 would read 32.4
    error = 0.25**2 * variance(inside) / len(inside) + 0.75**2 * variance(outside) / len(outside)
    squares = 0.25 * 20 / 12 * sum(t * t for t in inside) + 0.75 * 20 / 8 * sum(t * t for t in outside)
    spread = (squares - 20 * truth**2) / 19  # the weighted answers' variance
    assert weighted.answers == max(2, round(min(20, spread / error)))  # its mean's error, as answers (Kish)
    alike = post_stratified(stats(inside), stats([t + 1 for t in inside[:8]]), 0.25)  # sides alike
    assert alike is not None and alike.answers < 20  # weights unlike the draw cost precision (Kish)
    assert weighted.tokens_per_request == pytest.approx(truth, rel=0.01)
    assert weighted.attempts_per_request == pytest.approx(1.0)


def test_nothing_to_weight_with_when_a_side_with_rows_has_no_answers():
    assert post_stratified(stats([5, 6]), OutputStats(), 0.3) is None
    assert post_stratified(stats([5, 6]), OutputStats(), 1.0) == stats([5, 6])


def test_the_ledger_keeps_earlier_pilots_answers_and_replaces_only_this_ones_while_planning():
    earlier, mine = stats([30, 32, 28]), stats([60, 62, 10, 12])
    weighted = post_stratified(stats([60, 62]), stats([10, 12]), 0.1)
    assert weighted is not None and math.isclose(weighted.mean, 0.1 * 61 + 0.9 * 11, rel_tol=0.02)
    ledger = {"k": KeyStats({"pilot": earlier + mine, "apply": stats([20] * 5)}), "other": KeyStats()}
    with reweighing({"k": Reweighting("first", mine, weighted, 0.1, 2, 2)}):
        seen = reweighed(ledger)
    assert seen["k"].by_kind["pilot"].answers == earlier.answers + weighted.answers
    assert seen["k"].by_kind["pilot"].answer_tokens == earlier.answer_tokens + weighted.answer_tokens
    assert seen["k"].by_kind["apply"] == ledger["k"].by_kind["apply"] and seen["other"] == ledger["other"]
    assert reweighed(ledger) is ledger  # outside a pilot's planning: the ledger as it is
