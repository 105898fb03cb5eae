"""Spend control during a run: actual cost plus the upper bound of what is in flight never
passes the budget. A request is only sent after its worst-case cost is reserved."""

from __future__ import annotations


class Budget:
    def __init__(self, limit_usd: float | None, already_spent: float = 0.0) -> None:
        self.limit = limit_usd
        self.spent = already_spent
        self.reserved = 0.0
        self.exhausted = False

    def try_reserve(self, upper_cost: float) -> bool:
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
