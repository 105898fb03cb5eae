"""Output-length statistics of a length key and a model's input-token calibration: the numbers
the ledger's answers give (state/answer_stats.py reads them with SQL) and what follows from them
(mean, spread, skewness, re-ask shares, the input-length fit's sums). No SQL and no I/O here."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class OutputStats:
    """Output-token statistics of one length key (one run kind, or all of them)."""

    answers: int = 0  # accepted answers
    attempts: int = 0  # billed attempts, rejected ones included
    answer_tokens: int = 0  # output tokens of the accepted answers
    answer_tokens_sq: float = 0.0
    attempt_tokens: int = 0  # output tokens of every billed attempt
    max_tokens: int = 0
    # distinct requests with a billed attempt (answered in the end or not), per run: a request asked
    # again by a later run (--no-cache, --refresh) is a request again, not more attempts of one
    requests: int = 0
    answer_tokens_cu: float = 0.0  # sum of the accepted answers' output tokens cubed: their skewness
    # Re-asks in stages (reask_stats): a request's first billed attempt, and the billed attempts after
    # it (asked again after a rejection). Each stage's rejection share is measured on every attempt
    # of that stage sent, so a run cut off before its re-asks (a pilot's allowance) biases nothing.
    first_asks: int = 0
    first_rejected: int = 0  # of those, rejected by validation (`invalid_output`): asked again
    first_failed: int = 0  # of those, billed and failed for good (truncated, refused): not asked again
    reasks: int = 0
    reasks_rejected: int = 0
    reask_tokens: int = 0  # output tokens of the re-asks
    reask_added_input: int = 0  # input tokens a re-ask read beyond its request's first attempt (reported)
    first_truncated: int = 0  # first attempts cut by the token limit (in first_failed; see truncations_reasked)
    reasks_truncated: int = 0  # re-asks cut by it again
    # sums of the accepted answers' log output tokens, squared and cubed: the logs' spread and skewness
    # (plan/calibrate.py: a sample that missed the long answers shows a low skewness, its logs do not)
    answer_logs: float = 0.0
    answer_logs_sq: float = 0.0
    answer_logs_cu: float = 0.0
    # Accepted first answers with the plan's count of their input (x) and their output tokens (y):
    # count, sums of x, x^2, y, y^2 and x y, for a regression of answer length on input length
    # (plan/length_fit.py: a summary of a long review is longer).
    fit_answers: int = 0
    fit_input: float = 0.0
    fit_input_sq: float = 0.0
    fit_output: float = 0.0
    fit_output_sq: float = 0.0
    fit_cross: float = 0.0

    @property
    def mean(self) -> float:
        return self.answer_tokens / self.answers if self.answers else 0.0

    @property
    def stdev(self) -> float:
        return math.sqrt(sample_variance(self.answers, self.answer_tokens, self.answer_tokens_sq))

    @property
    def skewness(self) -> float:
        """The accepted answers' sample skewness (adjusted Fisher-Pearson G1; 0 below three answers or
        without spread): answer lengths are right-skewed (a few long answers), which moves the
        interval of their mean up (plan/calibrate.py)."""
        return _skewness(self.answers, self.answer_tokens, self.answer_tokens_sq, self.answer_tokens_cu)

    @property
    def log_variance(self) -> float:
        """The sample variance of the accepted answers' log output tokens (0 below two answers)."""
        return sample_variance(self.answers, self.answer_logs, self.answer_logs_sq)

    @property
    def log_skewness(self) -> float:
        """The sample skewness (G1) of the accepted answers' log output tokens: near 0 for log-normal
        lengths (0 below three answers or without spread)."""
        return _skewness(self.answers, self.answer_logs, self.answer_logs_sq, self.answer_logs_cu)

    @property
    def tokens_per_request(self) -> float:
        """Output tokens billed per request: re-asked and rejected attempts included."""
        return self.attempt_tokens / self.requests if self.requests else 0.0

    @property
    def attempts_per_request(self) -> float:
        return self.attempts / self.requests if self.requests else 1.0

    @property
    def reject_first(self) -> float:
        """Share of first attempts rejected by validation (each is asked again)."""
        return self.first_rejected / self.first_asks if self.first_asks else 0.0

    @property
    def reject_again(self) -> float:
        """Share of re-asks rejected again; the first attempts' share until a re-ask was answered."""
        return self.reasks_rejected / self.reasks if self.reasks else self.reject_first

    def reasks_per_request(self, max_attempts: int) -> float:
        """Re-asks a request is expected to send: rejected first (p1), then again (p2) each time,
        up to `max_attempts` in all: p1 (1 + p2 + ... + p2^(max_attempts - 2))."""
        p2 = self.reject_again
        return self.reject_first * sum(p2**k for k in range(max(0, max_attempts - 1)))

    def reask_spread(self, max_attempts: int) -> tuple[float, float]:
        """(variance of one request's count of re-asks, variance of the measured re-asks per request):
        the rest's own spread, and the error of p1 and p2 measured on this many attempts (binomial)."""
        p1, p2, m = self.reject_first, self.reject_again, max(1, max_attempts)
        if not p1 or not self.first_asks:
            return 0.0, 0.0
        counts = [(j, p2 ** (j - 1) * (1 - p2 if j < m - 1 else 1.0)) for j in range(1, m)]
        mean = p1 * sum(j * w for j, w in counts)
        own = p1 * sum(j * j * w for j, w in counts) - mean * mean
        grow = sum(p2**k for k in range(m - 1))
        slope = sum(k * p2 ** (k - 1) for k in range(1, m - 1))
        error = grow**2 * _share_variance(self.first_rejected, self.first_asks)
        if self.reasks:
            error += (p1 * slope) ** 2 * _share_variance(self.reasks_rejected, self.reasks)
        return max(0.0, own), error

    @property
    def first_tokens_each(self) -> float:
        """Output tokens of a first attempt (accepted or rejected)."""
        return (self.attempt_tokens - self.reask_tokens) / self.first_asks if self.first_asks else self.mean

    @property
    def reask_tokens_each(self) -> float:
        """Output tokens of a re-ask (a first attempt's until a re-ask was answered)."""
        return self.reask_tokens / self.reasks if self.reasks else self.first_tokens_each

    @property
    def reask_input_each(self) -> float:
        """Input tokens a re-ask adds to its request's planned input: the rejected answer sent back
        and the feedback turn (the rejected answer's length until a re-ask was answered)."""
        return self.reask_added_input / self.reasks if self.reasks else self.first_tokens_each

    def truncations_reasked(self) -> OutputStats:
        """These statistics where a truncated answer is asked again (`limits.on_truncation: reask`):
        a truncated first ask is rejected, not failed for good, and a re-ask truncated again is too,
        so the re-ask share and its cost count them (a truncation re-ask bills like a re-ask)."""
        return dataclasses.replace(
            self,
            first_rejected=self.first_rejected + self.first_truncated,
            first_failed=max(0, self.first_failed - self.first_truncated),
            reasks_rejected=self.reasks_rejected + self.reasks_truncated,
            first_truncated=0,
            reasks_truncated=0,
        )

    def __add__(self, other: OutputStats) -> OutputStats:
        sums = {f.name: getattr(self, f.name) + getattr(other, f.name) for f in dataclasses.fields(self)}
        sums["max_tokens"] = max(self.max_tokens, other.max_tokens)
        return OutputStats(**sums)


def sample_variance(n: int, total: float, squares: float) -> float:
    """The sample variance (n - 1 in the denominator) of n values from their sum and sum of squares,
    as the ledger keeps them (0 below two values; never below 0 from rounding)."""
    if n < 2:
        return 0.0
    return max(0.0, (squares - total * total / n) / (n - 1))


def _skewness(n: int, total: float, squares: float, cubes: float) -> float:
    """Adjusted Fisher-Pearson sample skewness G1 from power sums (0 below three values or without spread)."""
    if n < 3:
        return 0.0
    mean = total / n
    m2 = squares / n - mean * mean
    if m2 <= 1e-9 * max(mean * mean, 1.0):
        return 0.0
    m3 = cubes / n - 3 * mean * squares / n + 2 * mean**3
    return m3 / (m2 * math.sqrt(m2)) * math.sqrt(n * (n - 1)) / (n - 2)


def length_fit_sums(pairs: list[tuple[float, float]]) -> dict[str, Any]:
    """The fit fields of OutputStats for (counted input, output tokens) pairs of accepted first answers."""
    return {
        "fit_answers": len(pairs),
        "fit_input": float(sum(x for x, _ in pairs)),
        "fit_input_sq": float(sum(x * x for x, _ in pairs)),
        "fit_output": float(sum(y for _, y in pairs)),
        "fit_output_sq": float(sum(y * y for _, y in pairs)),
        "fit_cross": float(sum(x * y for x, y in pairs)),
    }


def _share_variance(hits: int, tries: int) -> float:
    """The variance of a share measured as `hits` of `tries` (binomial, Agresti-Coull: a share of
    few hits is less sure than p(1-p)/n says; none without a hit: no re-ask measured, none added)."""
    if not hits or not tries:
        return 0.0
    z2 = 1.645**2
    p = (hits + z2 / 2) / (tries + z2)
    return p * (1 - p) / (tries + z2)


@dataclass(frozen=True)
class KeyStats:
    """A length key's statistics per run kind (`apply`, `pilot`)."""

    by_kind: dict[str, OutputStats] = field(default_factory=dict)

    @property
    def total(self) -> OutputStats:
        return sum(self.by_kind.values(), OutputStats())


@dataclass(frozen=True)
class InputCalibration:
    """Provider-reported input tokens against the plan's count, over first attempts of one model."""

    answers: int = 0
    counted: int = 0
    reported: int = 0
    max_ratio: float = 0.0
    ratio_sum: float = 0.0  # sum of each answer's reported / counted, and of its square: their spread
    ratio_sq: float = 0.0

    @property
    def ratio(self) -> float:
        return self.reported / self.counted if self.counted else 1.0

    @property
    def spread(self) -> float:
        """Standard deviation of the answers' own reported / counted ratios (0 below two answers)."""
        return math.sqrt(sample_variance(self.answers, self.ratio_sum, self.ratio_sq))
