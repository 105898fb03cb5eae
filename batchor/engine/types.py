"""The engine's core types: a request to send (`WorkItem`), what the workers need per step
(`StepRuntime`) and why a run stops sending (`StopSignal`). Shared by the realtime, batch and
multi-worker executors, so none of them imports another for its types.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from batchor.errors import ProviderError
from batchor.plan.model import StepPlan
from batchor.plan.prices import ModelPrice
from batchor.plan.prompt_cache import upper_writes, write_1h
from batchor.plan.request import llm_request
from batchor.plan.tokens import get_counter
from batchor.providers.base import LLMRequest, Provider
from batchor.schema.feedback import added_messages


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
    fallbacks: list[StepRuntime] = field(default_factory=list)  # asked in turn for rows this model fails
    down: ProviderError | None = None  # out of quota or unreachable: rows go to the fallbacks directly
    escalation: StepRuntime | None = None  # `escalate.to`: the stronger model, for rows whose answer asks for it

    def upper_cost(self, item: WorkItem, max_tokens: int | None = None) -> float:
        """Worst-case cost of one attempt (at `max_tokens`, for a re-ask with a larger limit)."""
        if self.price is None:
            return 0.0
        tokens_in = int(item.input_tokens * self.plan.token_upper_factor)
        return self._upper(tokens_in, max_tokens or self.plan.max_tokens)

    def attempt_upper_cost(self, item: WorkItem, request: LLMRequest) -> float:
        """Worst-case cost of sending `request` for `item`: a re-ask pays its larger limit and the
        turns it added (the rejected answer and the feedback) as input."""
        if self.price is None:
            return 0.0
        added = added_messages(request.messages)
        extra = get_counter(self.plan.provider, self.plan.model).count_messages(added) if added else 0
        tokens_in = int((item.input_tokens + extra) * self.plan.token_upper_factor)
        max_tokens = request_max_tokens(request) or self.plan.max_tokens
        return self._upper(tokens_in, max_tokens)

    def _upper(self, tokens_in: int, tokens_out: int) -> float:
        """The most one attempt costs: no prompt-cache hit (a write where misses write), at the
        standard tier when a flex step may fall back to it."""
        assert self.price is not None
        writes = min(upper_writes(self.plan, 1), tokens_in)
        return self.price.cost(
            tokens_in,
            tokens_out,
            batch=self.plan.mode == "batch",
            flex=self.plan.service_tier == "flex" and not self.plan.flex_fallback,
            cache_write_tokens=round(writes),
            cache_write_1h_tokens=round(write_1h(self.plan, writes)),
        )

    def request(self, item: WorkItem) -> LLMRequest:
        """The request as planned (re-asks derive theirs from it, see recorder.ReaskPolicy)."""
        return llm_request(self.plan, item.key, item.messages)


def request_max_tokens(request: LLMRequest) -> int | None:
    value = request.params.get("max_tokens")
    return int(value) if value else None


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
