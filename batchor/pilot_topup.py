"""A pilot's top-up: more rows for the steps a `when:` (or a skipped upstream answer) starved.

A pilot of N rows answers every row of a step without `when:`, but a step that runs on a third of
the rows gets only ~N/3 answers, and its output length, measured on so few, is the largest error
of the plan that follows. So after the pilot, each LLM step with fewer than N answers gets more
rows: the same seeded sample drawn larger (its first N rows are the pilot's, cached, not paid
again), sized from the share of rows the step ran on, up to `TOP_UP_ROWS` x N more rows. The
largest such sample is planned before the pilot starts, so its upper bound is announced (and
approved, and held against the budget) with the pilot's own.
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
"""Top-up rounds at most: each sizes the sample from the share measured so far."""


@dataclass(frozen=True)
class TopUpBound:
    """The most a top-up may draw and cost, planned before the pilot starts."""

    steps: tuple[str, ...]  # LLM steps that may run on fewer than N of the pilot's rows
    rows: int  # rows of the largest sample (the pilot's N included)
    plan: CompiledPlan  # that sample's plan: its upper bound covers the pilot and every top-up round

    def to_dict(self) -> dict[str, Any]:
        totals = self.plan.header.totals
        return {"steps": list(self.steps), "rows_most": self.rows, "most_calls": totals.to_run,
                "cost_upper_usd": totals.cost_upper, "cost_upper_all_attempts_usd": reask_upper(self.plan.header)}


def filtered_steps(sampled: CompiledPlan) -> tuple[str, ...]:
    """LLM steps that may answer fewer rows than the pilot draws: a `when:` of their own or above."""
    steps = {s.name: s for s in sampled.header.steps}

    def filtered(name: str) -> bool:
        step = steps[name]
        return bool(step.when) or any(filtered(d) for d in step.depends_on)

    return tuple(s.name for s in sampled.header.steps if s.provider != "sql" and filtered(s.name))


def bound_rows(pilot_rows: int) -> int:
    return pilot_rows * (1 + TOP_UP_ROWS)


def answers_per_step(store: Any, run_ids: list[str], steps: tuple[str, ...]) -> dict[str, int]:
    """Accepted answers of `steps` in the pilot's runs (distinct requests answered)."""
    if not run_ids or not steps:
        return {}
    marks_runs, marks_steps = ", ".join("?" * len(run_ids)), ", ".join("?" * len(steps))
    rows = store.execute(f"SELECT step, count(DISTINCT request_key) FROM attempts WHERE run_id IN ({marks_runs}) "
                         f"AND step IN ({marks_steps}) AND outcome = 'ok' GROUP BY step", [*run_ids, *steps])
    found = {str(step): int(n) for step, n in rows}
    return {step: found.get(step, 0) for step in steps}


def next_rows(pilot_rows: int, drawn: int, answers: dict[str, int], available: int) -> int:
    """Rows of the next sample: enough for every starved step to reach N answers at the share it
    ran on so far (the most rows the bound allows when it ran on none); `drawn` when none is short."""
    most = min(bound_rows(pilot_rows), available)
    short = [n for n in answers.values() if n < pilot_rows]
    if not short or drawn >= most:
        return drawn
    least = min(short)
    wanted = most if least == 0 else math.ceil(drawn * pilot_rows / least)
    return max(drawn, min(most, wanted))
