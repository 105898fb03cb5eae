"""Re-asks that survive a crash.

A rejected answer is asked again with feedback (schema/feedback.py). That conversation lived only
in memory, so a process that died between a rejection and its re-ask sent the planned request
again, which at temperature 0 gives the same wrong answer. Each rejected attempt now keeps the
answer and the violations in the ledger (`attempts.feedback`); when a later apply finds a row
whose latest rejection has no result after it, its next attempt is that re-ask, numbered after
the attempts already made (so `max_attempts` still bounds the row).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, replace

from batchor.errors import InvalidOutputError, ProviderError
from batchor.providers.base import LLMRequest
from batchor.schema.feedback import reask_messages
from batchor.state.base import StateStore


@dataclass(frozen=True)
class Interrupted:
    """A row's latest rejection, its re-ask not answered yet."""

    rejected: str
    violations: tuple[str, ...]
    attempts: int  # attempts already made (the rejected one's number)


def feedback_record(error: ProviderError | None) -> str | None:
    """What the ledger keeps of a rejection so its re-ask can be rebuilt (None: nothing to re-ask)."""
    if not isinstance(error, InvalidOutputError) or error.rejected is None:
        return None
    return json.dumps({"rejected": error.rejected, "violations": list(error.violations)}, ensure_ascii=False)


def interrupted_reasks(store: StateStore, steps: Iterable[str]) -> dict[str, Interrupted]:
    """Per request key of `steps`: the latest rejection of a row that has no result yet."""
    names = sorted(set(steps))
    if not names:
        return {}
    found: dict[str, Interrupted] = {}
    for key, attempt, feedback in store.pending_rejections(names):
        data = json.loads(feedback)
        found[key] = Interrupted(data["rejected"], tuple(data["violations"]), int(attempt or 1))
    return found


def rejection(interrupted: Interrupted) -> InvalidOutputError:
    """The error a row ends with when its last allowed attempt was the rejected one."""
    error = InvalidOutputError("answer does not match the output schema: " + "; ".join(interrupted.violations[:3]))
    error.rejected, error.violations = interrupted.rejected, interrupted.violations
    return error


def resumed_request(request: LLMRequest, interrupted: Interrupted) -> LLMRequest:
    """The re-ask the crashed process would have sent next."""
    return replace(request, messages=reask_messages(request.messages, interrupted.rejected, interrupted.violations))
