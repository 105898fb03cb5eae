"""The interval of a plan's expected cost, from the answers its estimate learned from.

After a pilot the plan's expected cost per step already rests on measured answers (plan/estimate.py:
output tokens and attempts per request from the answers of the step's length key, once there are
enough of them; `when:` selectivity from the rows the pilot let it evaluate, or earlier jobs'
rows of the same condition when those are more). What is left is how
sure that figure is. A sum over R requests estimated from n answers of spread s is uncertain by the
mean's error (R^2 s^2 / n) and the requests' own spread (R s^2); a `when:` step below another step
adds the binomial error of its selectivity on the rows not known yet, and the binomial spread of
how many of this run's projected rows it runs on (at the share expected, its upstream's included).
The mean's error is taken at Student's t for n - 1 degrees of freedom (a few answers: wider).
Input counted with another tokenizer than the provider's is scaled by the measured
reported/counted ratio: its error is that ratio's mean error (C^2 s_r^2 / n) plus the requests'
own spread (C^2 s_r^2 / R), C the input cost at the counted tokens. The interval is expected +-
1.645 standard deviations (90 %), never below zero, moved by the answers' skewness: answer lengths
are right-skewed (a few long answers), so a sample that missed them has a low mean and a low spread
at once, and a symmetric interval misses above far more often than below (simulated, log-normal
sigma 0.6, 22 answers: 10.4 % above, 2.2 % below). The shift is the Edgeworth correction of the
studentized mean (Hall 1992: both ends up by G (2z^2 + 1) / 6n of the mean's R s) plus the
Cornish-Fisher one of the rest's own sum (G s (z^2 - 1) / 6), and the mean's part is widened by
the second-order term (mean_quantile), G the answers' skewness, at least a log-normal's where they
look log-normal (capped_skewness): 5-6 % above and 2-6 % below for log-normal sigma 0.35-0.8 and
15-50 answers (benchmarks/interval_coverage.py); little change for symmetric lengths. Steps' shifts
combine weighted by their variances (third cumulants add, so a sum of independent steps is less
skewed than each).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from batchor.plan.length_fit import fitted_sd
from batchor.plan.model import PlanHeader, StepPlan, output_per_request
from batchor.plan.output_spread import Z90, mean_quantile, output_spread
from batchor.plan.prices import ModelPrice
from batchor.state.length_stats import InputCalibration, KeyStats, OutputStats


@dataclass(frozen=True, slots=True)
class StepInterval:
    """One LLM step's expected cost, its 90 % interval and what it was measured on."""

    step: str
    requests: float  # requests expected to run
    expected: float
    low: float
    high: float
    measured: OutputStats  # the answers behind the estimate (pilot ones when there are some)
    source: str  # the estimate's source (plan/estimate.py): heuristic | history: N answers | pilot: N answers
    evaluated: int  # rows whose `when:` could be evaluated (dependent steps)
    ran: int  # of those, rows the step runs on
    when_source: str | None = None  # where that share comes from (plan/compile.py when_measure)
    half: float = 0.0  # half the interval's width before the skewness shift (1.645 standard deviations)
    shift: float = 0.0  # how far the answers' skewness moves the interval (up for right-skewed lengths)
    reasks: float = 0.0  # re-asks expected per request (OutputStats.reasks_per_request)
    unseen: float = 0.0  # how far re-asks no first ask showed may raise the upper end (`unseen_reasks`)

    @property
    def reask_rate(self) -> float:
        return self.reasks if self.measured.answers else 0.0

    @property
    def selectivity(self) -> float | None:
        return self.ran / self.evaluated if self.evaluated else None


@dataclass(frozen=True, slots=True)
class Calibration:
    """The plan's expected cost for the rows still to run, its interval, and what the job already spent
    on its cached rows (a pilot's: known exactly, so the whole job is that plus the rest's estimate)."""

    steps: tuple[StepInterval, ...]
    expected: float
    low: float
    high: float
    upper: float  # the plan's bound (one attempt per request)
    spent: float = 0.0  # what the job's pilots paid for its rows (part of the job, cached: pilot/ledger.py)

    @property
    def job(self) -> tuple[float, float, float]:
        """The whole job's expected cost and 90 % interval: the pilot's spend plus the rest's."""
        return self.spent + self.expected, self.spent + self.low, self.spent + self.high


def calibrate(
    header: PlanHeader, stats: dict[str, KeyStats], inputs: dict[str, InputCalibration] | None = None
) -> Calibration:
    """Every LLM step's interval and the total's (steps' errors independent, so variances add).
    `inputs`: per `provider:model`, the input calibration behind a `calibrated` input count."""
    inputs = inputs or {}
    attempts = header.limits.max_attempts
    truncations = header.limits.on_truncation == "reask"
    steps = tuple(
        _interval(
            step,
            _measured(step, stats.get(step.length_key), truncations),
            inputs.get(f"{step.provider}:{step.model}"),
            attempts,
        )
        for step in header.steps
        if not step.local
    )
    expected = sum(s.expected for s in steps)
    squares = sum(s.half**2 for s in steps)
    half = math.sqrt(squares)
    shift = sum(s.shift * s.half**2 for s in steps) / squares if squares else 0.0
    above = math.sqrt(squares + sum(s.unseen**2 for s in steps))
    return Calibration(
        steps, expected, max(0.0, expected - half + shift), expected + above + shift, header.totals.cost_upper
    )


def _measured(step: StepPlan, stats: KeyStats | None, reask_truncated: bool = False) -> OutputStats:
    """The answers the step's estimate learned from (none while it is the heuristic's), truncated
    ones counted as rejected where they are asked again (`limits.on_truncation: reask`)."""
    if stats is None or step.output_source == "heuristic":
        return OutputStats()
    return stats.total.truncations_reasked() if reask_truncated else stats.total


def _interval(
    step: StepPlan, measured: OutputStats, inputs: InputCalibration | None = None, max_attempts: int = 1
) -> StepInterval:
    counts = step.counts
    reasks = measured.reasks_per_request(max_attempts)
    tokens_each = output_per_request(step)
    requests = counts.output_tokens_expected / tokens_each if tokens_each else 0.0
    evaluated, ran = counts.when_evaluated, counts.when_ran  # the rows its share was measured on
    if counts.when_decided:  # a `when:` on the row alone was evaluated on every row
        evaluated, ran = counts.rows, max(0, counts.rows - counts.skipped)
    half = shift = unseen = 0.0
    if step.price is not None and measured.answers >= 2 and requests > 0:
        price = ModelPrice.from_dict(step.price)
        rate_out = price.cost(0, 1_000_000, batch=step.mode == "batch") / 1e6
        fitted = fitted_sd(step, measured, requests, (mean_quantile(measured) / Z90) ** 2)  # plan/length_fit.py
        sd = fitted * (1.0 + reasks) * rate_out  # per request, re-asks included
        out_var, shift = output_spread(measured, requests, sd)
        per_request = counts.cost_expected / requests
        in_var = _input_variance(step, price, requests, inputs)
        run_var = _selectivity_variance(step, evaluated, requests) + _run_count_variance(step, requests)
        half = Z90 * math.sqrt(
            out_var + in_var + run_var * per_request**2 + _reask_variance(step, price, measured, requests, max_attempts)
        )
        unseen = (
            unseen_reasks(step, measured, max_attempts)
            * requests
            * _reask_cost(step, price, measured, max_attempts, requests)
        )
    expected = counts.cost_expected
    high = expected + math.sqrt(half**2 + unseen**2) + shift
    return StepInterval(
        step.name,
        requests,
        expected,
        max(0.0, expected - half + shift),
        high,
        measured,
        step.output_source,
        evaluated,
        ran,
        counts.when_source,
        half,
        shift,
        reasks,
        unseen,
    )


def unseen_reasks(step: StepPlan, measured: OutputStats, max_attempts: int) -> float:
    """Re-asks per request the upper end allows for where no first ask of a structured step was
    rejected: none seen in n first asks still leaves a share up to 3/n (the rule of three: the
    one-sided 95 % bound of a share never seen, the interval's upper end), one re-ask each. The
    expected cost keeps none; a step that cannot be asked again (max_attempts 1) adds nothing."""
    if step.schema is None or max_attempts < 2 or not measured.first_asks or measured.first_rejected:
        return 0.0
    return min(1.0, 3 / measured.first_asks)


def _reask_variance(
    step: StepPlan, price: ModelPrice, measured: OutputStats, requests: float, max_attempts: int
) -> float:
    """Variance of the rest's cost from how many re-asks it sends: the error of the rejection shares
    measured (R^2 var(q) C^2) plus the requests' own spread (R var(K) C^2), C what one re-ask costs."""
    own, error = measured.reask_spread(max_attempts)
    if not (own or error) or not step.counts.to_run:
        return 0.0
    return (requests**2 * error + requests * own) * _reask_cost(step, price, measured, max_attempts, requests) ** 2


def _reask_cost(step: StepPlan, price: ModelPrice, measured: OutputStats, max_attempts: int, requests: float) -> float:
    """What one re-ask costs: its request's input again, the rejected answer and the feedback, and
    a new answer (the first ask's where no re-ask was answered yet)."""
    asks = _counted_requests(step, requests)
    if not asks:
        return 0.0
    planned = step.counts.input_tokens - asks * step.reask_input_tokens
    first_in = planned / asks / (1.0 + measured.reasks_per_request(max_attempts))
    return (
        price.cost(
            round(1_000 * (first_in + measured.reask_input_each)),
            round(1_000 * measured.reask_tokens_each),
            batch=step.mode == "batch",
        )
        / 1_000
    )


def _input_variance(step: StepPlan, price: ModelPrice, requests: float, inputs: InputCalibration | None) -> float:
    """Variance of the input cost when it is the counted tokens scaled by a measured ratio."""
    if inputs is None or not step.input_source.startswith("calibrated") or inputs.answers < 2:
        return 0.0
    planned = step.counts.input_tokens - _counted_requests(step, requests) * step.reask_input_tokens  # no feedback
    counted = planned / step.input_factor if step.input_factor else 0.0
    cost = price.cost(round(counted), 0, batch=step.mode == "batch")  # the input at ratio 1
    return (cost * inputs.spread) ** 2 * (1 / inputs.answers + 1 / max(requests, 1.0))


def _counted_requests(step: StepPlan, requests: float) -> float:
    """The requests the step's input tokens count: every one to run, or where rows are projected
    below a `when:` or another step, the expected ones (plan/compile.py counts their input at the
    expected share, as their cost)."""
    return requests if step.counts.projected else float(step.counts.to_run)


def _selectivity_variance(step: StepPlan, evaluated: int, requests: float) -> float:
    """Variance of how many of the rows not known yet the step runs on, from the error of its share
    (its `when:`'s and its upstream's) measured on `evaluated` rows: binomial, Agresti-Coull, as a
    share of few rows near 0 or 1 is less sure than p(1-p)/n says (17 of 17 is not certainty)."""
    if not evaluated or not step.counts.projected or step.counts.when_decided:
        return 0.0  # a `when:` that reads only the row was decided for every row: no selectivity error
    n = evaluated + Z90**2
    p = (_run_share(step, requests) * evaluated + Z90**2 / 2) / n
    return step.counts.projected**2 * p * (1 - p) / n


def _run_count_variance(step: StepPlan, requests: float) -> float:
    """Variance of how many projected rows this run's rows will send, at the expected share
    (binomial): even a share known exactly leaves the count of a finite run to chance."""
    if not step.counts.projected or step.counts.when_decided:
        return 0.0
    p = _run_share(step, requests)
    return step.counts.projected * p * (1 - p)


def _run_share(step: StepPlan, requests: float) -> float:
    """The share of projected rows expected to send a request (rows rendered now all do)."""
    known = step.counts.to_run - step.counts.projected
    return min(1.0, max(0.0, (requests - known) / step.counts.projected))


def calibration_lines(calibration: Calibration, rehearsal: bool = False) -> list[str]:
    """The calibrated plan in text: the total with its interval, then what each step measured."""
    from batchor.plan.summary import money

    note = " (REHEARSAL numbers: --mock answers, not the model's)" if rehearsal else ""
    rest = (calibration.expected, calibration.low, calibration.high)
    lines = [
        f"Calibrated plan{note}:",
        f"  cost        {money(rest[0])} expected, 90% interval {interval_text(*rest)}{_unmeasured(calibration)} "
        f"(at most {money(calibration.upper)}, one attempt per request)",
    ]
    if calibration.spent:
        job = calibration.job
        lines.append(
            f"  whole job   {money(job[0])} expected, 90% interval {interval_text(*job)}"
            f"{_unmeasured(calibration)} (the pilots' {money(calibration.spent)} spent on its rows, "
            "cached, plus the rest's)"
        )
    for s in calibration.steps:
        lines.append(
            f"  step {s.step}: {money(s.expected)} ({interval_text(s.expected, s.low, s.high)}); {_measured_text(s)}"
        )
    return lines


def interval_text(expected: float, low: float, high: float) -> str:
    """'$0.114 .. $0.151 (-12% / +15%)': the ends in money and as shares of the estimate, which
    differ where the answers' skewness moved the interval up."""
    from batchor.plan.summary import money, spread_text

    if expected <= 0:
        return f"{money(low)} .. {money(high)}"
    return f"{money(low)} .. {money(high)} ({spread_text((expected - low) / expected, (high - expected) / expected)})"


def _unmeasured(calibration: Calibration) -> str:
    """' without step(s) X (no answers to learn from)': steps whose cost the interval cannot count,
    so an interval of +-0 % is not read as certainty."""
    names = [s.step for s in calibration.steps if s.expected > 0 and s.measured.answers < 2]
    return f" without step(s) {', '.join(names)} (no answers to learn from)" if names else ""


def _measured_text(s: StepInterval) -> str:
    m = s.measured
    if not m.answers and m.first_asks:
        parts = [
            f"{s.source}: all {m.first_asks:,} first asks rejected or failed, {m.reasks:,} re-asks "
            f"({m.reasks_rejected:,} rejected again): no answer to learn from, no interval; check the "
            "prompt and the schema"
        ]
    elif not m.answers:
        parts = [f"{s.source}: too few answers to learn from, no interval"]
    else:
        parts = [f"{s.source}, ~{m.mean:,.0f} output tokens each (sd {m.stdev:,.0f})", f"re-asks {s.reask_rate:.0%}"]
        if s.unseen:
            parts[-1] += (
                f" (none in {m.first_asks:,} first asks; the upper end allows up to {min(1.0, 3 / m.first_asks):.0%})"
            )
    if s.selectivity is not None:
        parts.append(
            f"when: runs on {s.ran:,} of {s.evaluated:,} rows evaluated ({s.selectivity:.0%}; {s.when_source})"
        )
    return ", ".join(parts)


def calibration_dict(calibration: Calibration) -> dict[str, object]:
    """The calibrated plan as JSON (plan --pilot --json)."""
    expected, low, high = calibration.job
    return {
        "expected_usd": calibration.expected,
        "interval_90": [calibration.low, calibration.high],
        "upper_usd": calibration.upper,
        "spent_usd": calibration.spent,
        "job": {"expected_usd": expected, "interval_90": [low, high]},
        "steps": [
            {
                "step": s.step,
                "requests": s.requests,
                "expected_usd": s.expected,
                "interval_90": [s.low, s.high],
                "source": s.source,
                "answers": s.measured.answers,
                "mean_output_tokens": s.measured.mean,
                "stdev_output_tokens": s.measured.stdev,
                "reask_rate": s.reask_rate,
                "selectivity": s.selectivity,
                "when_source": s.when_source,
            }
            for s in calibration.steps
        ],
    }
