"""Spend control during a run: actual cost plus the upper bound of what is in flight never
passes the budget. Every attempt (re-asks included) is only sent after its worst-case cost is
reserved, and settles on what the provider billed for it. A run may also be held to a number of
calls (a pilot's allowance): each reservation is one call, so no attempt is sent past it.

A budget covers a job across its resumes: what the job's unfinished earlier runs spent
(`carried`) counts against it, so running the same command again after a stop grants nothing new."""

from __future__ import annotations

from batchor.humanize import money
from batchor.plan.budget import CLI_SOURCE, SPEC_SOURCE, effective_max_cost, plan_budget, raise_hint

__all__ = [
    "CALL_LIMIT",
    "CLI_SOURCE",
    "SPEC_SOURCE",
    "Budget",
    "Hold",
    "carried_note",
    "effective_max_cost",
    "plan_budget",
    "raise_hint",
]

CALL_LIMIT = "call allowance"
"""How `Budget.reached` names a stop by the run's call allowance (not by its money)."""


class Budget:
    def __init__(self, limit_usd: float | None, carried: float = 0.0, source: str = CLI_SOURCE) -> None:
        self.limit = limit_usd
        self.source = source
        self.carried = carried  # spent by this job's earlier, unfinished runs
        self.spent = carried
        self.reserved = 0.0
        self.exhausted = False
        self.max_calls: int | None = None  # the most attempts the run may send (None: no such limit)
        self.calls = 0  # attempts reserved so far

    def cap_calls(self, max_calls: int | None) -> None:
        """Hold the run to `max_calls` attempts, re-asks and retries included (a pilot's allowance)."""
        self.max_calls = max_calls

    @property
    def calls_reached(self) -> bool:
        return self.max_calls is not None and self.calls >= self.max_calls

    def try_reserve(self, upper_cost: float) -> bool:
        """Reserve one attempt: its worst-case cost, and one call of the allowance."""
        if self.calls_reached:
            self.exhausted = True
            return False
        if not self.reserve_money(upper_cost):
            return False
        self.calls += 1
        return True

    def reserve_money(self, upper_cost: float) -> bool:
        if self.limit is None:
            return True
        if self.spent + self.reserved + upper_cost > self.limit + 1e-12:
            self.exhausted = True
            return False
        self.reserved += upper_cost
        return True

    def settle(self, reserved: float, actual: float) -> None:
        """Replace a reservation by what the request really cost."""
        if self.limit is not None:
            self.reserved = max(0.0, self.reserved - reserved)
        self.spent += actual

    def reached(self) -> str:
        """Why the run stopped sending, naming the budget's source (or the call allowance)."""
        if self.calls_reached:
            return f"{CALL_LIMIT} of {self.max_calls:,} calls reached"
        return f"{self.source} {money(self.limit)} reached{carried_note(self.carried)}"


def carried_note(carried: float) -> str:
    """' ($0.40 of it spent by earlier runs of this job)', or nothing when they spent nothing."""
    return f" ({money(carried)} of it spent by earlier runs of this job)" if carried > 0 else ""


class Hold:
    """One row's reservation: the worst case of its next attempt, held until that attempt is
    billed. A re-ask must reserve again (`renew`) before it is sent."""

    def __init__(self, budget: Budget, amount: float, active: bool = True) -> None:
        self.budget, self.amount, self.active = budget, amount, active

    def settle(self, actual: float) -> None:
        """The attempt was billed `actual` (0 when no answer came): the reservation is used up."""
        self.budget.settle(self.amount if self.active else 0.0, actual)
        self.amount, self.active = 0.0, False

    def renew(self, amount: float) -> bool:
        """Reserve the next attempt's worst case (no-op while the last one is still held)."""
        if self.active:
            return True
        if not self.budget.try_reserve(amount):
            return False
        self.amount, self.active = amount, True
        return True

    def release(self) -> None:
        """Give back what no attempt used."""
        if self.active:
            self.budget.settle(self.amount, 0.0)
        self.amount, self.active = 0.0, False
