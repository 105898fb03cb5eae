"""A pilot's call allowance and its top-up: more rows for the steps a `when:` starved, within it.

A pilot of N rows through S LLM steps may make at most N x S calls, every billed attempt counted
(re-asks and retries of billed answers included); the engine holds each of its runs to what is
left of that allowance (engine/budget.py `cap_calls`), so no case passes it. A step without
`when:` answers the N rows; a step that runs on a third of them gets ~N/3 answers and leaves
calls unspent. Those calls buy more rows of the same seeded sample (its first N rows are the
pilot's, cached, not paid again), as many as the calls left pay for at the calls per row measured
so far, until the starved step has N answers, the allowance is spent, or `TOP_UP_ROWS` x N more
rows are drawn. The step's estimate then rests on the answers it got; few answers widen its
interval (plan/calibrate.py, Student's t). The largest sample is planned before the pilot starts,
so its upper bound is announced (and approved, and held against the budget) with the pilot's own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from batchor.plan.plan_file import CompiledPlan
from batchor.plan.summary import reask_upper

TOP_UP_ROWS = 3
"""A top-up draws at most this many times the pilot's N rows more (upstream steps run on them)."""
ROUNDS = 3
"""Top-up rounds at most: each sizes the sample from the calls per row and the share measured so far."""


@dataclass(frozen=True)
class TopUpBound:
    """The most a top-up may draw and cost, planned before the pilot starts."""

    steps: tuple[str, ...]  # LLM steps that may run on fewer than N of the pilot's rows
    rows: int  # rows of the largest sample (the pilot's N included)
    plan: CompiledPlan  # that sample's plan: its upper bound covers the pilot and every top-up round
    where: str | None = None  # a stratified top-up: the step whose row-only `when:` its rows meet

    def to_dict(self) -> dict[str, Any]:
        totals = self.plan.header.totals
        return {
            "steps": list(self.steps),
            "rows_most": self.rows,
            "cost_upper_usd": totals.cost_upper,
            "cost_upper_all_attempts_usd": reask_upper(self.plan.header),
            "drawn_where": self.where,
        }


def llm_steps(sampled: CompiledPlan) -> list[str]:
    """The steps that call a model (SQL steps make no call)."""
    return [s.name for s in sampled.header.steps if not s.local]


def call_allowance(sampled: CompiledPlan) -> int:
    """N x steps: the most calls a pilot of N rows may make, every billed attempt counted."""
    return (sampled.header.input.sample or sampled.header.totals.rows) * len(llm_steps(sampled))


def filtered_steps(sampled: CompiledPlan) -> tuple[str, ...]:
    """LLM steps that may answer fewer rows than the pilot draws: a `when:` of their own or above."""
    steps = {s.name: s for s in sampled.header.steps}

    def filtered(name: str) -> bool:
        step = steps[name]
        return bool(step.when) or any(filtered(d) for d in step.depends_on)

    return tuple(s.name for s in sampled.header.steps if not s.local and filtered(s.name))


def bound_rows(pilot_rows: int) -> int:
    return pilot_rows * (1 + TOP_UP_ROWS)


@dataclass(frozen=True)
class Drawn:
    """Where the pilot stands before a top-up round."""

    rows: int  # rows of the sample drawn so far
    calls: int  # billed calls made so far
    answers: dict[str, int]  # the starved steps' answers so far


def next_rows(pilot_rows: int, drawn: Drawn, allowance: int, available: int, per_row: float | None = None) -> int:
    """Rows of the next sample: enough for every starved step to reach N answers at the share it ran
    on so far, no more than the calls left pay for at the calls per row so far (`per_row`, else
    measured over every row drawn), nor than the bound and the input allow; `drawn.rows` when no
    step is short or no row more can be paid for. A stratified top-up counts its stratum's rows."""
    most = min(bound_rows(pilot_rows), available)
    short = [n for n in drawn.answers.values() if n < pilot_rows]
    if not short or drawn.rows >= most or drawn.calls >= allowance:
        return drawn.rows
    if per_row is None:
        per_row = drawn.calls / drawn.rows if drawn.rows else 1.0
    affordable = drawn.rows + (math.floor((allowance - drawn.calls) / per_row) if per_row > 0 else most)
    least = min(short)
    wanted = most if least == 0 else math.ceil(drawn.rows * pilot_rows / least)
    return max(drawn.rows, min(most, wanted, affordable))
