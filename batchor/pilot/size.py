"""How many pilot rows would bring the whole job's 90 % interval within +-10 %.

After a pilot of N rows the whole job's interval is its pilots' spend (exact) plus the rest's
interval (plan/calibrate.py). A larger pilot of the same seed (its rows are the smaller one's and
more: pilot/strata.py, spec/inputs.py) narrows it two ways: each step's answers grow (the mean's
error shrinks as 1/n), and the rows it answers leave the rest (their cost becomes exact spend).
The rest's own spread per request and the exact parts do not change. Rather than copy the
interval's formulas, the size is found by asking `calibrate` itself about a pilot of N' rows:
every step's pilot answers scaled by N'/N (all their sums, so every statistic the interval reads
keeps its value: mean, spread, skewness, re-ask shares), its rest's counts scaled down by the
requests those rows move into the pilot, their expected cost added to the spend; a `when:` share
measured on this input's rows is measured on N'/N times as many. The smallest N' whose whole-job
interval lies within the target on both sides is the answer (bisection; the interval narrows as
N' grows), rounded up to ten rows. A pilot of more than half the input is no pilot: where even that
does not reach the target, the plan says why (the rest's own spread alone is wider, or the input
has too few rows).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from batchor.plan.calibrate import Calibration, calibrate
from batchor.plan.model import PlanHeader, StepPlan
from batchor.state.length_stats import InputCalibration, KeyStats

TARGET = 0.10
"""The whole job's 90 % interval the pilot size aims at: within +-10 % of the expected cost."""
_SCALED_COUNTS = (
    "to_run",
    "input_tokens",
    "output_tokens_expected",
    "output_tokens_upper",
    "cost_expected",
    "cost_upper",
    "projected",
)  # the rest's counts that shrink as the pilot takes requests
_EXACT = 1e6  # answers' scale standing for a mean known exactly (the rest's own spread alone)


@dataclass(frozen=True)
class PilotSize:
    """The whole job's interval after this pilot, and the pilot that would bring it within the target."""

    target: float
    pilot_rows: int  # this pilot's N
    input_rows: int
    ends: tuple[float, float]  # the whole job's interval now: how far below / above its expected cost (shares)
    rows: int | None = None  # the pilot that reaches the target (None: within already, or no pilot does)
    more_cost_upper: float = 0.0  # what the rows beyond this pilot's cost at most (one attempt each)
    projected: tuple[float, float] | None = None  # the interval's ends at that pilot
    reason: str | None = None  # why no pilot reaches the target

    @property
    def within(self) -> bool:
        return max(self.ends) <= self.target

    @property
    def more_rows(self) -> int:
        return max(0, (self.rows or self.pilot_rows) - self.pilot_rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "within": self.within,
            "interval_ends": list(self.ends),
            "pilot_rows": self.pilot_rows,
            "rows_needed": self.rows,
            "more_rows": self.more_rows,
            "more_cost_upper_usd": self.more_cost_upper,
            "projected_interval_ends": list(self.projected) if self.projected else None,
            "reachable": self.within or self.rows is not None,
            "reason": self.reason,
        }

    def text(self) -> str | None:
        """The line the calibrated plan prints when the whole job is not within the target."""
        if self.within:
            return None
        target = f"+-{self.target:.0%}"
        if self.rows is None:
            return f"no pilot of at most half the input brings this within {target}: {self.reason}"
        from batchor.plan.summary import money, spread_text

        projected = f" ({spread_text(*self.projected)})" if self.projected else ""
        return (
            f"a pilot of ~{self.rows:,} rows would bring this within {target}{projected} "
            f"({self.more_rows:,} more rows, at most {money(self.more_cost_upper)}; cached, part of the job)"
        )


def job_ends(calibration: Calibration) -> tuple[float, float]:
    """How far the whole job's 90 % interval reaches below and above its expected cost (shares)."""
    expected, low, high = calibration.job
    if expected <= 0:
        return 0.0, 0.0
    return (expected - low) / expected, (high - expected) / expected


def pilot_size(
    header: PlanHeader,
    stats: dict[str, KeyStats],
    inputs: dict[str, InputCalibration] | None,
    spent: float,
    pilot_rows: int,
    target: float = TARGET,
) -> PilotSize:
    """The smallest pilot (rows of the same seeded sample) whose whole-job interval lies within
    `target`, asked of `calibrate` with the answers and the rest that pilot would leave."""
    input_rows = header.totals.rows
    now = job_ends(_grown(header, stats, inputs, spent, pilot_rows, pilot_rows)[0])
    found = PilotSize(target, pilot_rows, input_rows, now)
    if found.within or pilot_rows <= 0:
        return found
    most = input_rows // 2
    if most <= pilot_rows or not _reaches(header, stats, inputs, spent, pilot_rows, most, target):
        return dataclasses.replace(found, reason=_why_not(header, stats, inputs, spent, target, most))
    low, high = pilot_rows, most  # low does not reach the target, high does
    while high - low > 1:
        middle = (low + high) // 2
        if _reaches(header, stats, inputs, spent, pilot_rows, middle, target):
            high = middle
        else:
            low = middle
    rows = min(most, 10 * math.ceil(high / 10))
    calibration, more_upper = _grown(header, stats, inputs, spent, pilot_rows, rows)
    return dataclasses.replace(found, rows=rows, more_cost_upper=more_upper, projected=job_ends(calibration))


def _reaches(
    header: PlanHeader,
    stats: dict[str, KeyStats],
    inputs: dict[str, InputCalibration] | None,
    spent: float,
    pilot_rows: int,
    rows: int,
    target: float,
) -> bool:
    return max(job_ends(_grown(header, stats, inputs, spent, pilot_rows, rows)[0])) <= target


def _why_not(
    header: PlanHeader,
    stats: dict[str, KeyStats],
    inputs: dict[str, InputCalibration] | None,
    spent: float,
    target: float,
    most: int,
) -> str:
    """The rest's own spread alone (its mean known exactly) is wider than the target, or else the
    input has too few rows for a pilot of at most half of it to measure the mean well enough."""
    exact = {key: _scaled_stats(found, _EXACT) for key, found in stats.items()}
    own = job_ends(dataclasses.replace(calibrate(header, exact, inputs), spent=spent))
    if max(own) > target:
        from batchor.plan.summary import spread_text

        return (
            f"the rest's own spread alone is {spread_text(*own)} (its requests' costs vary that much "
            "even with their mean known exactly)"
        )
    return f"the input has too few rows ({header.totals.rows:,}) for a pilot to measure the mean that well"


def _grown(
    header: PlanHeader,
    stats: dict[str, KeyStats],
    inputs: dict[str, InputCalibration] | None,
    spent: float,
    pilot_rows: int,
    rows: int,
) -> tuple[Calibration, float]:
    """The calibration a pilot of `rows` rows would give (and what its extra rows cost at most)."""
    factor = rows / pilot_rows
    steps, grown, more, more_upper = [], dict(stats), 0.0, 0.0
    for step in header.steps:
        found = stats.get(step.length_key) if not step.local else None
        pilot = found.by_kind.get("pilot") if found is not None else None
        if found is None or pilot is None or not pilot.requests or factor <= 1.0 or not step.counts.to_run:
            steps.append(step)
            continue
        extra = min(float(step.counts.to_run), (factor - 1.0) * pilot.requests)  # requests moved into the pilot
        grown[step.length_key] = KeyStats({**found.by_kind, "pilot": _scaled(pilot, 1.0 + extra / pilot.requests)})
        kept = 1.0 - extra / step.counts.to_run
        more += (1.0 - kept) * step.counts.cost_expected
        more_upper += (1.0 - kept) * step.counts.cost_upper
        steps.append(_rest(step, kept, 1.0 + extra / pilot.requests))
    scaled_inputs = {model: _scaled(found, factor) for model, found in (inputs or {}).items()} if factor > 1 else inputs
    calibration = calibrate(header.model_copy(update={"steps": steps}), grown, scaled_inputs)
    return dataclasses.replace(calibration, spent=spent + more), more_upper


def _rest(step: StepPlan, kept: float, measured: float) -> StepPlan:
    """The step with `kept` of its rest's requests left, its `when:` share measured on `measured`
    times the rows (where it was measured on this input's rows, the pilot's)."""
    counts = step.counts
    update: dict[str, Any] = {name: _times(getattr(counts, name), kept) for name in _SCALED_COUNTS}
    if (counts.when_source or "").startswith("this input"):
        update |= {
            "when_evaluated": round(counts.when_evaluated * measured),
            "when_ran": round(counts.when_ran * measured),
        }
    return step.model_copy(update={"counts": counts.model_copy(update=update)})


def _scaled_stats(found: KeyStats, factor: float) -> KeyStats:
    return KeyStats({kind: _scaled(stats, factor) for kind, stats in found.by_kind.items()})


def _scaled(stats: Any, factor: float) -> Any:
    """Every sum of `stats` (answers and their totals, re-ask stages, input ratios) times `factor`:
    the statistics they make keep their values, measured on `factor` times as many. Maxima stay."""
    values = {
        f.name: _times(getattr(stats, f.name), factor)
        for f in dataclasses.fields(stats)
        if not f.name.startswith("max_")
    }
    return dataclasses.replace(stats, **values)


def _times(value: Any, factor: float) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return round(value * factor) if isinstance(value, int) else value * factor
