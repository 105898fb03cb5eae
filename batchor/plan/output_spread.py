"""The statistics of measured answer lengths that the calibrated plan's interval rests on
(plan/calibrate.py): how far a mean measured on a few right-skewed answers may lie from the true
one, and how much the sum of the answers still to come may spread. Kept apart from the interval's
bookkeeping because these are the formulas benchmarks/interval_coverage.py checks by simulation.
"""

from __future__ import annotations

import math

from batchor.state.length_stats import OutputStats

Z90 = 1.645  # two-sided 90 % of a normal distribution
T90_FEW = (Z90, 6.314, 2.920, 2.353, 2.132)  # Student's t, two-sided 90 %, 1-4 degrees of freedom (tables)

SKEW_LIMIT = 3.0
"""The sample skewness used at most (either sign): a few answers far from the rest can give a wild
figure (a bimodal sample), and a larger shift than this would move the interval off the estimate."""

SECOND_ORDER = 5 * Z90 * (4 * Z90**2 - 1) / 72
"""The studentized mean's 90 % quantiles move out by SECOND_ORDER G^2 / n beyond Student's t
(Cornish-Fisher, second order; Hall 1992, 2.6: from p1 p1' - z p1^2 / 2 - p2). Its kurtosis term,
z (3 - z^2) kappa / 12, is 0.04 kappa: at 90 % z^2 is close to 3, so the answers' kurtosis is left out."""


def output_spread(measured: OutputStats, requests: float, sd: float) -> tuple[float, float]:
    """The variance of `requests` answers' sum estimated from `measured` answers of spread `sd` (the
    mean's error at `mean_quantile`, plus the requests' own spread), and how far their skewness moves
    its 90 % interval: the mean's part (Edgeworth expansion of the studentized mean, Hall 1992:
    G (2z^2 + 1) / 6n of R s) and the rest's own sum's (Cornish-Fisher: G s (z^2 - 1) / 6), G the
    answers' skewness (`capped_skewness`; none below three answers). The rest's rows are the job's
    rows the pilot did not draw, not new draws: sampled without replacement from the N = n + R rows,
    R (mean_N - mean_n) has variance N R S^2 / n = (R^2 / n + R) S^2 and third cumulant R (1 - R^2 /
    n^2) mu_3, the same as R new draws give, so the formula holds for the rest as it is."""
    n = measured.answers
    small = (mean_quantile(measured) / Z90) ** 2  # the mean's error at its own quantile, as a share of Z90's
    variance = (small * requests**2 / n + requests) * sd**2
    skew = capped_skewness(measured)
    return variance, skew * sd * (requests * (2 * Z90**2 + 1) / (6 * n) + (Z90**2 - 1) / 6)


def mean_quantile(measured: OutputStats) -> float:
    """The studentized mean's 90 % quantile (two-sided, before the skewness shift): Student's t for
    n - 1 degrees of freedom plus the second-order term of a skewed sample (SECOND_ORDER G^2 / n)."""
    n = measured.answers
    return t90(n - 1) + (SECOND_ORDER * capped_skewness(measured) ** 2 / n if n >= 3 else 0.0)


def capped_skewness(measured: OutputStats) -> float:
    """The skewness the interval uses, within +-SKEW_LIMIT (0 below three answers): the answers'
    sample skewness G, or where they look log-normal, at least the skewness of a log-normal of their
    logs' variance v, (e^v + 2) sqrt(e^v - 1). Why: G from a few answers of a heavy tail is biased
    low (log-normal sigma 0.6, 30 answers: median 1.2 for a true 2.3), most of all when the sample
    missed the long answers and its mean and spread are low too, while v is measured without them.
    They look log-normal when right-skewed (G > 0), their logs' skewness is within +-1.645 sqrt(6/n)
    (its 90 % range for a normal sample) and their own variation coefficient is at least half the
    log-normal's, sqrt(e^v - 1) (two modes far apart have symmetric logs but a far wider log spread)."""
    n = measured.answers
    if n < 3:
        return 0.0
    skew, grown = measured.skewness, math.expm1(measured.log_variance)
    if (
        skew > 0
        and grown > 0
        and abs(measured.log_skewness) < Z90 * math.sqrt(6 / n)
        and measured.stdev >= 0.5 * measured.mean * math.sqrt(grown)
    ):
        skew = max(skew, (grown + 3) * math.sqrt(grown))
    return max(-SKEW_LIMIT, min(SKEW_LIMIT, skew))


def mean_ends(measured: OutputStats) -> tuple[float, float] | None:
    """How far the measured mean output may lie below and above the true one (90 %, as shares of
    it: 0.08, 0.12 reads -8 % / +12 %): `mean_quantile` over the answers, moved up by their skewness
    (the mean's Edgeworth term of `output_spread`). None below two answers."""
    n, mean = measured.answers, measured.mean
    if n < 2 or mean <= 0:
        return None
    half = mean_quantile(measured) * measured.stdev / math.sqrt(n)
    shift = capped_skewness(measured) * measured.stdev * (2 * Z90**2 + 1) / (6 * n)
    return max(0.0, half - shift) / mean, (half + shift) / mean


def t90(freedom: int) -> float:
    """Student's t two-sided 90 % quantile (the table below 5 degrees of freedom, then Cornish-Fisher:
    within 0.5 % from 5), Z90 for many: a mean measured on few answers is less sure than it looks."""
    if freedom < 1:
        return Z90
    if freedom < len(T90_FEW):
        return T90_FEW[freedom]
    z, v = Z90, float(freedom)
    return z + (z**3 + z) / (4 * v) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v * v)
