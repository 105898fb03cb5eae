"""Fallback models: a row its step's model could not answer is asked of the next model of the
step's `model.fallback`, under that model's own request key (the cache never gives one model's
answer for another's request).

Which failures move a row on is the spec's `fallback_on`. The request that failed is stored as
failed, linked (`answered_by`) to the fallback request that answered; `StateStore.follow_fallbacks`
points the job's rows at that answer, so outputs, later steps and status read it, and a later
apply finds the link instead of paying again.
"""

from __future__ import annotations

from batchor.engine.types import StepRuntime, WorkItem
from batchor.errors import (
    ContentRefusedError,
    InvalidOutputError,
    ProviderError,
    QuotaExhaustedError,
    TransientProviderError,
    TruncatedOutputError,
)
from batchor.plan.request import request_key_for

_CONDITIONS: tuple[tuple[type[ProviderError], str], ...] = (
    (InvalidOutputError, "invalid_output"),
    (ContentRefusedError, "refused"),
    (TruncatedOutputError, "truncated"),
    (QuotaExhaustedError, "quota"),
    (TransientProviderError, "unreachable"),  # 5xx, timeouts and no connection, after their attempts
)


def condition(error: ProviderError) -> str | None:
    """The `fallback_on` condition a failure meets, if any."""
    return next((name for kind, name in _CONDITIONS if isinstance(error, kind)), None)


def moves_on(step: StepRuntime, error: ProviderError) -> bool:
    """Whether `error` moves a row of `step` on to its fallback models."""
    return bool(step.fallbacks) and condition(error) in step.plan.fallback_on


def fallback_item(item: WorkItem, runtime: StepRuntime) -> WorkItem:
    """The row's request as sent to a fallback model: the same messages, that model's key."""
    return WorkItem(request_key_for(runtime.plan, item.messages), item.step, item.messages, item.input_tokens)


def moving_codes(fallback_on: list[str]) -> tuple[str, ...]:
    """The error codes of the failures that move a row on under these `fallback_on` conditions
    (each condition's error class and its subclasses): what a stored failure is judged by."""
    codes: set[str] = set()
    todo: list[type[ProviderError]] = [kind for kind, name in _CONDITIONS if name in fallback_on]
    while todo:
        kind = todo.pop()
        todo.extend(kind.__subclasses__())
        codes.add(kind.code)
    return tuple(sorted(codes))
