"""The engine's core types: a request to send (`WorkItem`), what the workers need per step
(`StepRuntime`) and why a run stops sending (`StopSignal`). Shared by the realtime, batch and
multi-worker executors, so none of them imports another for its types.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from batchor.plan.model import StepPlan
from batchor.plan.prices import ModelPrice
from batchor.providers.base import Completion, Provider


@dataclass(slots=True)
class WorkItem:
    key: str
    step: str
    messages: tuple[dict[str, str], ...]
    input_tokens: int


@dataclass
class StepRuntime:
    """What the workers need per step: the plan entry, its client and its price."""

    plan: StepPlan
    provider: Provider
    price: ModelPrice | None

    def upper_cost(self, item: WorkItem) -> float:
        if self.price is None:
            return 0.0
        tokens_in = int(item.input_tokens * self.plan.token_upper_factor)
        return self.price.cost(tokens_in, self.plan.max_tokens, batch=self.plan.mode == "batch")

    def cost(self, completion: Completion, item: WorkItem) -> float:
        if self.price is None:
            return 0.0
        tokens_in = completion.input_tokens or item.input_tokens
        return self.price.cost(tokens_in, completion.output_tokens, cached_input_tokens=completion.cached_input_tokens,
                               batch=self.plan.mode == "batch")


class StopSignal:
    """Why the run stops sending: interrupted, budget, quota."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.detail: str | None = None
        self.event = asyncio.Event()

    def stop(self, reason: str, detail: str | None = None) -> None:
        if self.reason is None:
            self.reason, self.detail = reason, detail
        self.event.set()

    @property
    def stopped(self) -> bool:
        return self.reason is not None
