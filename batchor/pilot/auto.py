"""`--pilot auto`: a pilot that grows its own seeded sample until the whole job is within +-10 %.

It starts as a pilot of `START` rows (pilot/run.py). When the whole job's 90 % interval then
reaches beyond the target on either side, it grows the same seeded sample to the size pilot/size.py
computes (the rows already answered are the larger sample's first, cached: only the new rows are
paid), at most `ROUNDS` times. It never passes the largest auto pilot, `GROWTH` x `START` rows (or
the input's rows): before anything is sent, that pilot's upper bound (its top-up's included) is
announced and approved as the most the auto pilot can cost, and its calls, rows x steps, bound
every round together (each round's allowance counts the calls of the rounds before). A round runs
within what is left of the budget (the lower of `--max-cost` and `limits.max_cost_usd`); one the
budget left cannot cover is tried at half the growth, then not at all. It says what it did and
why it stopped: within the target, no pilot reaches it (and why), the largest auto pilot reached,
the budget, the rounds spent, or a round that stopped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from batchor import api
from batchor.engine.events import Event
from batchor.errors import CostLimitError
from batchor.pilot.run import PilotResult, finished, pilot_plan, run_pilot, top_up_bound
from batchor.pilot.size import TARGET
from batchor.pilot.topup import TopUpBound, llm_steps
from batchor.plan.budget import plan_budget
from batchor.plan.plan_file import CompiledPlan
from batchor.plan.summary import reask_upper

START = 50
"""Rows of an auto pilot's first round."""
GROWTH = 8
"""The largest auto pilot: this many times its first round's rows."""
ROUNDS = 2
"""Growth rounds at most after the first (each sized from the answers so far)."""


@dataclass(frozen=True)
class AutoBound:
    """The most an auto pilot may draw, call and cost: its largest pilot, planned before it starts."""

    rows: int  # rows of the largest auto pilot (GROWTH x START, or the input's rows)
    calls: int  # its allowance: rows x LLM steps, every round together
    plan: CompiledPlan  # its plan, or its top-up's largest sample's: the upper bound covers every round

    def to_dict(self) -> dict[str, Any]:
        header = self.plan.header
        return {
            "rows_most": self.rows,
            "most_calls": self.calls,
            "cost_upper_usd": header.totals.cost_upper,
            "cost_upper_all_attempts_usd": reask_upper(header),
        }


@dataclass
class AutoPilot:
    """What an auto pilot did: its rounds (the last one's plan and calibration cover them all)."""

    rounds: list[PilotResult]
    stop: str  # why it stopped growing
    bound: AutoBound
    target: float = TARGET
    steps: list[str] = field(default_factory=list)  # what it said along the way

    @property
    def result(self) -> PilotResult:
        return self.rounds[-1]

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "rounds": [r.rows for r in self.rounds],
            "rows": self.result.rows,
            "calls": self.result.calls,
            "cost_usd": self.result.cost_usd,
            "stop": self.stop,
            "bound": self.bound.to_dict(),
        }


def auto_bound(spec: api.SpecLike, start: int, options: dict[str, Any]) -> AutoBound:
    """The largest auto pilot (GROWTH x `start` rows, at most the input's) and its upper bound."""
    largest = pilot_plan(spec, GROWTH * start, **options)
    bound, _ = top_up_bound(spec, largest, options)
    rows = largest.header.totals.rows  # the input's, where it has fewer
    return AutoBound(rows, rows * len(llm_steps(largest)), bound.plan if bound is not None else largest)


def run_auto(
    spec: api.SpecLike,
    *,
    start: int = START,
    target: float = TARGET,
    seed: int | None = None,
    state: str | None = None,
    model: str | None = None,
    mock: bool = False,
    mode: str | None = None,
    max_cost: float | None = None,
    on_event: Callable[[Event], None] | None = None,
    handle_signals: bool = True,
    report: Callable[[str], None] | None = None,
    announce: Callable[[CompiledPlan, TopUpBound | None, AutoBound], None] | None = None,
) -> AutoPilot:
    """Pilot `start` rows, then grow the same seeded sample while the whole job's interval is wider
    than `target` (see the module's docstring). `announce` sees the first round's plan, its top-up's
    bound and the auto pilot's before anything is sent; `report` each round's reason."""
    options: dict[str, Any] = {"seed": seed, "state": state, "model": model, "mock": mock, "mode": mode}
    bound = auto_bound(spec, start, options)
    budget, _ = plan_budget(max_cost, bound.plan.header)
    say = report or (lambda _text: None)

    def first_announce(sampled: CompiledPlan, top_up: TopUpBound | None) -> None:
        if announce is not None:
            announce(sampled, top_up, bound)

    rounds = [
        run_pilot(
            spec,
            start,
            **options,
            max_cost=budget,
            on_event=on_event,
            handle_signals=handle_signals,
            announce=first_announce,
            target=target,
        )
    ]
    for _ in range(ROUNDS):
        last = rounds[-1]
        wanted, why = _next_size(last, bound, target)
        if wanted is None:
            return AutoPilot(rounds, why, bound, target)
        grown = _grow(spec, last, wanted, {**options, "target": target}, budget, (on_event, handle_signals), say, why)
        if isinstance(grown, str):
            return AutoPilot(rounds, grown, bound, target)
        rounds.append(grown)
    return AutoPilot(rounds, _last_words(rounds[-1], bound, target), bound, target)


def _next_size(last: PilotResult, bound: AutoBound, target: float) -> tuple[int | None, str]:
    """The next round's rows and why, or None and why the pilot stops growing."""
    size, ends = last.size, _ends(last)
    if not finished(last.last_outcome):
        return None, f"the pilot stopped ({last.last_outcome.status}): not grown"
    if size is None or size.within:
        return None, f"within +-{target:.0%} after {last.rows:,} rows ({ends})"
    if size.rows is None:
        return None, f"{ends} after {last.rows:,} rows; {size.text()}"
    wanted = min(size.rows, bound.rows)
    if wanted <= last.rows:
        return None, (
            f"{ends} after {last.rows:,} rows is wider than +-{target:.0%}, and that is the largest auto "
            f"pilot ({bound.rows:,} rows; a pilot of ~{size.rows:,} rows should reach it)"
        )
    capped = f", capped at the largest auto pilot ({bound.rows:,} rows)" if wanted < size.rows else ""
    return wanted, (
        f"{last.rows:,} rows ({last.calls:,} calls, {_money(last.cost_usd)} in all): {ends} is wider "
        f"than +-{target:.0%}, a pilot of ~{size.rows:,} rows should reach it{capped}"
    )


def _grow(
    spec: api.SpecLike,
    last: PilotResult,
    wanted: int,
    options: dict[str, Any],
    budget: float | None,
    run: tuple[Callable[[Event], None] | None, bool],
    say: Callable[[str], None],
    why: str,
) -> PilotResult | str:
    """One growth round to `wanted` rows within the budget left (at half the growth when that is too
    little), or why none ran."""
    on_event, handle_signals = run
    left = None if budget is None else max(0.0, budget - last.cost_usd)
    for rows in dict.fromkeys((wanted, last.rows + (wanted - last.rows) // 2)):
        if rows <= last.rows:
            break
        say(f"pilot auto: {why}; growing the same sample to {rows:,} rows ({rows - last.rows:,} more)")
        try:
            return run_pilot(
                spec, rows, **options, max_cost=left, on_event=on_event, handle_signals=handle_signals, prior=last
            )
        except CostLimitError:  # nothing was sent
            say(f"pilot auto: {rows:,} rows may cost more than the budget left ({_money(left)})")
    return f"the budget left ({_money(left)}) covers no larger pilot; stopped at {last.rows:,} rows"


def _last_words(last: PilotResult, bound: AutoBound, target: float) -> str:
    """Why the pilot stopped after its last growth round: within, or why not, or still wider."""
    wanted, why = _next_size(last, bound, target)
    if wanted is None:
        return why
    needed = last.size.rows if last.size is not None else wanted
    return (
        f"{ROUNDS} growth rounds done: {_ends(last)} after {last.rows:,} rows is still wider than "
        f"+-{target:.0%} (a pilot of ~{needed:,} rows should reach it)"
    )


def _ends(result: PilotResult) -> str:
    from batchor.plan.summary import spread_text

    size = result.size
    return "the whole job's interval " + (spread_text(*size.ends) if size is not None else "unknown")


def _money(value: float | None) -> str:
    from batchor.plan.summary import money

    return "no budget" if value is None else money(value)
