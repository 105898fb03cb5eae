"""The regression estimator of answer length on input length (plan/length_fit.py) on known data:
its fit against the standard library's least squares, the test that keeps the plain mean where
lengths do not follow the input, and the interval it gives the rest's sum (simulated)."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from batchor.plan.length_fit import MIN_FIT_ANSWERS, adjusted_for_input, fitted_sd, length_fit, t975
from batchor.plan.model import StepPlan
from batchor.plan.output_spread import Z90, mean_quantile, output_spread
from batchor.state.length_stats import OutputStats, length_fit_sums


def stats_of(pairs: list[tuple[float, float]]) -> OutputStats:
    """Accepted first answers (input, output tokens), as the ledger's sums hold them."""
    ys = [y for _, y in pairs]
    n = len(ys)
    return OutputStats(
        answers=n,
        attempts=n,
        answer_tokens=round(sum(ys)),
        answer_tokens_sq=sum(y * y for y in ys),
        attempt_tokens=round(sum(ys)),
        requests=n,
        answer_tokens_cu=sum(y**3 for y in ys),
        first_asks=n,
        **length_fit_sums(pairs),
    )


def step_with(stats: OutputStats, fit_output: float | None = None) -> StepPlan:
    """A step whose estimate learned from `stats` (as plan/estimate.py leaves it)."""
    fit = length_fit(stats, stats.mean if fit_output is None else fit_output, 1.0)
    return StepPlan(
        name="s",
        provider="openai",
        model="m",
        params={},
        prompt="p",
        max_tokens=4000,
        expected_output_tokens=round(stats.mean),
        expected_output_mean=stats.mean,
        key_prefix="k",
        output_error=0.1,
        output_error_ends=(0.08, 0.12),
        length_fit=fit,
    )


def test_the_fit_is_least_squares_and_moves_the_mean_to_the_rest_s_input():
    xs = [20 + 8 * i for i in range(30)]
    pairs = [(x, 30 + 1.5 * x + (8 if i % 3 == 0 else -4)) for i, x in enumerate(xs)]
    stats = stats_of(pairs)
    fit = length_fit(stats, stats.mean, 1.0)
    assert fit is not None
    slope, intercept = statistics.linear_regression(xs, [y for _, y in pairs])
    assert fit.slope == pytest.approx(slope) and fit.input_mean == pytest.approx(statistics.mean(xs))
    assert fit.r == pytest.approx(statistics.correlation(xs, [y for _, y in pairs]))
    residuals = [y - intercept - slope * x for x, y in pairs]
    assert fit.residual_sd == pytest.approx(math.sqrt(sum(e * e for e in residuals) / 28))
    step = adjusted_for_input(step_with(stats), 400.0)
    assert step.expected_output_mean == pytest.approx(intercept + slope * 400.0)
    assert step.length_fit is not None and step.length_fit.rest_input_mean == 400.0
    # its error: s_e sqrt(1/n + d^2/Sxx) against the plain mean's s_y / sqrt(n), relative to each mean;
    # s_e grown in proportion to the mean at the rest's input (lengths spread in proportion to their size)
    d, sxx = 400.0 - statistics.mean(xs), sum((x - statistics.mean(xs)) ** 2 for x in xs)
    se = fit.residual_sd * step.expected_output_mean / stats.mean * math.sqrt(1 / 30 + d * d / sxx)
    scale = se / step.expected_output_mean / (stats.stdev / math.sqrt(30) / stats.mean)
    assert step.output_error == pytest.approx(0.1 * scale)
    assert step.output_error_ends == pytest.approx((0.08 * scale, 0.12 * scale))


def test_lengths_that_do_not_follow_the_input_keep_the_plain_mean():
    xs = [20 + 7 * i for i in range(40)]
    ys = [100 + (25 if (i * 7) % 4 < 2 else -25) for i in range(40)]  # no relation to x
    stats = stats_of(list(zip(xs, ys)))
    slope, _ = statistics.linear_regression(xs, ys)
    assert abs(slope) < 0.5 and length_fit(stats, stats.mean, 1.0) is None
    step = step_with(stats)
    assert adjusted_for_input(step, 999.0) == step  # no fit: nothing changes
    assert fitted_sd(step, stats, 300, 1.0) == stats.stdev


def test_too_few_answers_or_no_spread_of_input_keep_the_plain_mean():
    few = stats_of([(10 * i, 5 * i) for i in range(1, MIN_FIT_ANSWERS)])
    assert length_fit(few, few.mean, 1.0) is None
    flat = stats_of([(50, 10 + i) for i in range(30)])
    assert length_fit(flat, flat.mean, 1.0) is None
    assert length_fit(stats_of([(10 * i, 5 * i) for i in range(1, MIN_FIT_ANSWERS + 1)]), 1.0, 1.0) is not None


def test_the_slope_test_is_at_five_percent():
    assert t975(8) == pytest.approx(2.306, abs=0.003) and t975(48) == pytest.approx(2.011, abs=0.002)
    assert t975(10_000) == pytest.approx(1.960, abs=0.001)


def test_re_asks_follow_the_input_too():
    pairs = [(10.0 * i, 4.0 * i + (3 if i % 2 else -3)) for i in range(1, 31)]
    stats = stats_of(pairs)
    fit = length_fit(stats, 90.0, 1.5)  # 0.5 re-asks a request: each answers anew at that input
    assert fit is not None
    step = adjusted_for_input(step_with(stats).model_copy(update={"length_fit": fit}), fit.input_mean + 100)
    assert step.expected_output_mean == pytest.approx(90.0 + 1.5 * fit.slope * 100)


def simulated(trials: int, answers: int, rest: int, shift: float, seed: int) -> tuple[float, float, float, float]:
    """Lengths twice the input times a log-normal spread (sigma 0.4), inputs log-normal (median 60,
    sigma 0.5; the rest's `shift` x longer): (RMSE of the regression's sum, of the plain mean's,
    share of the rest's actual sum inside the regression's 90 % interval, share with a fit)."""
    rng = random.Random(seed)
    errors, plain, inside, fitted = [], [], 0, 0

    def draw(scale: float) -> tuple[float, float]:
        x = 60 * scale * rng.lognormvariate(0, 0.5)
        return x, 2 * x * rng.lognormvariate(0, 0.4)

    for _ in range(trials):
        measured = stats_of([draw(1.0) for _ in range(answers)])
        others = [draw(shift) for _ in range(rest)]
        actual = sum(y for _, y in others)
        step = adjusted_for_input(step_with(measured), sum(x for x, _ in others) / rest)
        fitted += step.length_fit is not None
        expected = rest * (step.expected_output_mean or 0.0)
        sd = fitted_sd(step, measured, rest, (mean_quantile(measured) / Z90) ** 2)
        variance, skew_shift = output_spread(measured, rest, sd)
        half = Z90 * math.sqrt(variance)
        inside += expected - half + skew_shift <= actual <= expected + half + skew_shift
        errors.append(expected / actual - 1)
        plain.append(rest * measured.mean / actual - 1)
    rmse = [math.sqrt(sum(e * e for e in v) / trials) for v in (errors, plain)]
    return rmse[0], rmse[1], inside / trials, fitted / trials


def test_where_lengths_follow_the_input_the_estimate_is_tighter_and_its_interval_holds():
    ours, plain, covered, fitted = simulated(1500, 50, 350, 1.0, seed=3)
    assert fitted > 0.99
    assert ours < 0.8 * plain  # a third tighter or so (RMSE of the whole sum)
    assert 0.85 <= covered <= 0.96


def test_a_job_of_longer_inputs_than_its_answers_is_predicted_by_the_fit_not_the_mean():
    """History of short rows, a job of rows twice as long: the plain mean is ~half the truth."""
    ours, plain, covered, _ = simulated(600, 50, 350, 2.0, seed=4)
    assert plain > 0.4 and ours < 0.2
    assert covered >= 0.8


def test_a_fit_asked_about_more_answers_narrows_its_mean_error_alone():
    """pilot/size.py scales every sum of the answers to ask what a larger pilot gives: the fit's mean
    error shrinks as 1/n, the rest's own spread (its residuals) stays."""
    import dataclasses

    stats = stats_of([(10.0 * i, 4.0 * i + (3 if i % 2 else -3)) for i in range(1, 31)])
    step = adjusted_for_input(step_with(stats), 200.0)

    def variance(measured: OutputStats) -> float:
        return (300**2 / measured.answers + 300) * fitted_sd(step, measured, 300, 1.0) ** 2

    bigger = dataclasses.replace(stats, answers=stats.answers * 1_000_000)
    fit = step.length_fit
    assert fit is not None
    at_rest = fit.residual_sd * (step.expected_output_mean or 0.0) / stats.mean  # the residuals' spread there
    assert variance(bigger) < variance(stats) / 3
    assert variance(bigger) == pytest.approx(300 * at_rest**2, rel=0.01)
