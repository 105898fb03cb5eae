"""Answer length that follows input length: a regression estimator of the rest's mean output.

A summary of a long review is longer. The plan knows every request's input tokens before anything
runs, so where the measured answers' length grows with their input, the rest's mean output is
better estimated as ybar + b (Xbar_rest - xbar) (survey sampling's regression estimator) than as
ybar: b the least-squares slope of output on counted input tokens over the accepted first answers,
xbar their mean input, Xbar_rest the mean counted input of the requests still to run (exact, from
the plan). A pilot of short rows, or last month's shorter reviews, then predicts a job of long
ones. Its error is the residual spread's, s_e^2 (1/n + (Xbar_rest - xbar)^2 / Sxx) (the slope's own
error included), and the rest's own spread is R s_e^2: where the fit is good, (1 - r^2) of the
mean's.

Used only where the slope is significant (two-sided t-test at 5 %, at least MIN_FIT_ANSWERS
answers): elsewhere the plain mean, exactly as before, since a slope fitted to lengths that do
not depend on the input only adds noise (simulated: 1-3 % worse RMSE without the test).
"""

from __future__ import annotations

import math

from batchor.plan.model import LengthFit, StepPlan
from batchor.state.length_stats import OutputStats

MIN_FIT_ANSWERS = 10
"""Fewer accepted first answers with a counted input than this: no regression, the plain mean."""
Z975 = 1.959964  # one-sided 97.5 % of a normal distribution: a two-sided test at 5 %


def t975(freedom: int) -> float:
    """Student's t two-sided 95 % quantile (Cornish-Fisher, within 0.1 % from 8 degrees of freedom)."""
    z, v = Z975, float(max(1, freedom))
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v * v)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
    )


def length_fit(stats: OutputStats, per_request: float, reask_factor: float) -> LengthFit | None:
    """The regression of output on input tokens over `stats`' accepted first answers, when its
    slope is significant; None otherwise (the plain mean is kept)."""
    n = stats.fit_answers
    if n < MIN_FIT_ANSWERS:
        return None
    x_mean, y_mean = stats.fit_input / n, stats.fit_output / n
    sxx = stats.fit_input_sq - n * x_mean * x_mean
    syy = stats.fit_output_sq - n * y_mean * y_mean
    sxy = stats.fit_cross - n * x_mean * y_mean
    if sxx <= 1e-9 * max(1.0, stats.fit_input_sq) or syy <= 1e-9 * max(1.0, stats.fit_output_sq):
        return None  # every input (or answer) as long as the others: nothing to regress on
    slope = sxy / sxx
    residual_var = max(0.0, syy - slope * sxy) / (n - 2)
    t = slope / math.sqrt(residual_var / sxx) if residual_var > 0 else math.copysign(math.inf, slope)
    if abs(t) < t975(n - 2):
        return None
    return LengthFit(
        answers=n,
        slope=slope,
        input_mean=x_mean,
        input_ss=sxx,
        residual_sd=math.sqrt(residual_var),
        r=sxy / math.sqrt(sxx * syy),
        t=t if math.isfinite(t) else 1e9,
        per_request=per_request,
        reask_factor=reask_factor,
        answer_mean=stats.mean,
        answer_sd=stats.stdev,
        answer_count=stats.answers,
    )


def source_text(fit: LengthFit | None) -> str:
    """', adjusted for input length (r 0.71)' after the answers' source, or nothing."""
    return f", adjusted for input length (r {fit.r:.2f})" if fit is not None else ""


def adjusted_for_input(step: StepPlan, rest_input_mean: float) -> StepPlan:
    """The step's expected output per request at the rest's mean counted input (and the error of
    that mean scaled to the regression's); unchanged without a significant fit."""
    fit = step.length_fit
    if fit is None:
        return step
    shift = fit.slope * (rest_input_mean - fit.input_mean)
    mean = max(1.0, fit.per_request + fit.reask_factor * shift)
    scale = _error_scale(fit, rest_input_mean, fit.answer_mean + shift)
    ends = step.output_error_ends
    return step.model_copy(
        update={
            "expected_output_tokens": max(1, round(mean)),
            "expected_output_mean": mean,
            "output_error": step.output_error * scale if step.output_error is not None else None,
            "output_error_ends": (ends[0] * scale, ends[1] * scale) if ends else None,
            "length_fit": fit.model_copy(update={"rest_input_mean": rest_input_mean}),
        }
    )


def _error_scale(fit: LengthFit, rest_input_mean: float, mean: float) -> float:
    """The regression mean's relative error over the plain mean's (both from the same answers)."""
    plain = fit.answer_sd / math.sqrt(fit.answer_count) / fit.answer_mean if fit.answer_count and fit.answer_mean else 0
    if plain <= 0 or mean <= 0:
        return 1.0
    return _mean_error(fit, rest_input_mean) / mean / plain


def _mean_error(fit: LengthFit, rest_input_mean: float, more: float = 1.0) -> float:
    """Standard error of the fitted mean at the rest's input: s_e sqrt(1/n + d^2 / Sxx), s_e at
    the rest's input where that is longer (_residual_sd; a line's end far below the answers is as
    unsure as the long answers that set its slope make it). `more`: as if measured on that many
    times the answers."""
    d = rest_input_mean - fit.input_mean
    spread = max(fit.residual_sd, _residual_sd(fit, rest_input_mean))
    return spread * math.sqrt((1 / fit.answers + d * d / fit.input_ss) / more)


def _residual_sd(fit: LengthFit, rest_input_mean: float) -> float:
    """The answers' spread around the line where the rest's input lies. Answer lengths spread in
    proportion to their size (log-normal: a constant coefficient of variation), so a line fitted
    on short rows has a spread too small for long ones: s_e scaled by the fitted mean there over
    the answers' mean (no change at their own input)."""
    y_mean = fit.per_request / fit.reask_factor if fit.reask_factor else fit.per_request
    at_rest = y_mean + fit.slope * (rest_input_mean - fit.input_mean)
    return fit.residual_sd * (max(0.0, at_rest) / y_mean if y_mean > 0 else 1.0)


def fitted_sd(step: StepPlan, measured: OutputStats, requests: float, small: float) -> float:
    """The answers' spread to pass to output_spread.output_spread, whose variance of the rest's sum is
    (small R^2 / n + R) sd^2 from n answers: the plain sd, or where the fit is used the sd that
    gives the regression's (small R^2 s_e^2 (1/n + d^2 / Sxx) + R s_e^2). `small`: the mean's
    error at Student's t, as a share of the normal's (calibrate.py). `measured` may stand for more
    answers than the fit was made on (a larger pilot asked about, pilot/size.py): the mean's error
    shrinks alike."""
    fit = step.length_fit
    if fit is None or fit.rest_input_mean is None or not measured.answers or requests <= 0:
        return measured.stdev
    more = measured.answers / fit.answer_count if fit.answer_count else 1.0
    mean_var = small * requests**2 * _mean_error(fit, fit.rest_input_mean, more) ** 2
    own_var = requests * _residual_sd(fit, fit.rest_input_mean) ** 2
    return math.sqrt((mean_var + own_var) / (small * requests**2 / measured.answers + requests))
