"""Fallback models and escalation for batch-mode steps (spec `model.fallback`, `escalate:`).

A realtime step asks another model row by row, as each row settles (engine/realtime.py). A batch
step's rows settle together when its batches are collected, so its other models are asked in waves
of their own: once the step's own batches are in, the rows whose answer must come from another
model are found in the state, and sent to that model:
- a row whose request failed with a `fallback_on` reason goes to the next fallback model (after
  that model failed it too, to the one after);
- a row whose own model's answer meets `escalate.when` goes to the stronger model.

Each wave runs in a batch of that model's provider when the step runs `mode: batch`, and, when
the step's `mode: auto` settled on batch, only when the wave has at least `batch_threshold` rows
(a few rows are answered realtime in seconds instead of waiting for another batch window).

On a shared PostgreSQL state every worker derives the same waves from the state once the step's own
requests are all settled; each wave's keys are listed as work items of their own, so each request is
claimed, and sent, by one worker (engine/workers.py).

The wave is derived from the state on every pass: an apply killed at any point finds the same rows
again, re-attaches to the other model's live batches (the batch ledger knows them by request
family), and links answers already stored instead of asking again; nothing is paid twice. An
answer is linked to the row's own request (`answered_by`) and `StateStore.follow_fallbacks`
points the row at it, as in realtime.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from batchor.engine.events import Progress
from batchor.engine.fallback import fallback_item, moving_codes
from batchor.engine.pending import PendingKeys
from batchor.engine.types import StepRuntime, WorkItem
from batchor.engine.work import StepWork
from batchor.plan.escalate import condition, escalates
from batchor.plan.model import StepPlan
from batchor.plan.plan_file import CompiledPlan
from batchor.state.base import StateStore


@dataclass
class Wave:
    """Requests of one other model for rows of a batch step."""

    runtime: StepRuntime  # the other model's
    items: list[WorkItem]
    reason: str  # fallback | escalate

    def in_batch(self, threshold: int) -> bool:
        """A batch of the model's provider (`mode: batch`; `auto` from `threshold` rows on), or realtime."""
        mode = self.runtime.plan.mode
        return mode == "batch" or (mode == "auto" and len(self.items) >= threshold)

    def work(self, batch: bool) -> OtherModelWork:
        """The wave as the executors take a step's work; in a batch, at the batch rate."""
        plan = self.runtime.plan.model_copy(update={"mode": "batch" if batch else "realtime"})
        return OtherModelWork(plan, self.items, f"{plan.name} {self.reason} {plan.provider}:{plan.model}")


class OtherModelWork:
    """A wave's requests in the shape of a step's work (`StepWork`): what the executors read, and
    what a shared run's workers claim (under `lease_name`, apart from the step's own requests)."""

    widens = True  # a shared run lists each wave's keys beside the earlier ones (engine/workers.py)

    def __init__(self, step: StepPlan, items: list[WorkItem], lease_name: str) -> None:
        self.step, self._items, self.lease_name = step, items, lease_name
        self.pending = PendingKeys.first_seen(pa.array([i.key for i in items], pa.string()))

    def items(self, wanted: Callable[[str], bool] | None = None) -> Iterator[WorkItem]:
        """The requests still pending (the batch hand-over may take some of them, see batch_handover.py);
        with `wanted`, only those it accepts (a shared run's worker: its claims)."""
        pending = self.pending.mask(pa.array([i.key for i in self._items], pa.string()))
        return (i for i, want in zip(self._items, pending.to_pylist()) if want and (wanted is None or wanted(i.key)))


def next_waves(plan: CompiledPlan, store: StateStore, runtime: StepRuntime) -> list[Wave]:
    """Link the answers other models already gave to rows of the step; the requests still to send,
    one wave per model. Rows already answered by another model are not looked at again."""
    step = runtime.plan
    own = f"{step.provider}:{step.model}"
    rows = store.job_results(plan.job_id, step.name)
    mine = pc.or_(pc.is_null(rows.column("model")), pc.equal(rows.column("model"), own))
    rows = rows.filter(pc.fill_null(mine, True))
    codes = set(moving_codes(step.fallback_on)) if runtime.fallbacks else set()
    failed, answered = _candidates(rows, codes, step if runtime.escalation is not None else None)
    items = _items(plan, store, step, failed + answered)
    fell = [items[k] for k in failed if k in items]
    unsure = [items[k] for k in answered if k in items]
    others = {id(o): o for o in [*runtime.fallbacks, *([runtime.escalation] if runtime.escalation else [])]}
    keyed = {(k, id(o)): fallback_item(items[k], o) for k in items for o in others.values()}
    stored = store.stored_results([i.key for i in keyed.values()])
    links: list[tuple[str, str]] = []
    sends: dict[int, Wave] = {}
    for item in fell:
        for other in runtime.fallbacks:
            ask = keyed[(item.key, id(other))]
            found = stored.get(ask.key)
            if found is None:
                sends.setdefault(id(other), Wave(other, [], "fallback")).items.append(ask)
            elif found.status == "succeeded":
                links.append((item.key, ask.key))
            if found is None or found.status == "succeeded" or found.error_code not in codes:
                break
    if runtime.escalation is not None:
        for item in unsure:
            ask = keyed[(item.key, id(runtime.escalation))]
            found = stored.get(ask.key)
            if found is None:
                sends.setdefault(-id(runtime.escalation), Wave(runtime.escalation, [], "escalate")).items.append(ask)
            elif found.status == "succeeded":
                links.append((item.key, ask.key))  # else the stronger model failed it: its own answer stands
    store.link_answers(links)
    return list(sends.values())


def _candidates(rows: pa.Table, codes: set[str], escalating: StepPlan | None) -> tuple[list[str], list[str]]:
    """Request keys of the step's own model: failed with a reason that moves them on; answered,
    with an answer that meets `escalate.when` (`escalating`: the step, when it escalates)."""
    failed: dict[str, None] = {}
    answered: dict[str, None] = {}
    template = condition(escalating.name, escalating.escalate_when) if escalating and escalating.escalate_when else None
    columns = (rows.column(c).to_pylist() for c in ("request_key", "status", "error_code", "output"))
    for key, status, code, output in zip(*columns):
        if key is None:
            continue
        if status == "failed" and code in codes:
            failed[key] = None
        elif status == "succeeded" and template is not None and escalating is not None:
            answer = json.loads(output) if escalating.json_answers else output
            if escalates(template, escalating.name, answer):
                answered[key] = None
    return list(failed), list(answered)


def _items(plan: CompiledPlan, store: StateStore, step: StepPlan, keys: list[str]) -> dict[str, WorkItem]:
    """The step's own requests for these keys, as they were sent (their messages, counted tokens)."""
    if not keys:
        return {}
    work = StepWork(plan, step, store)
    work.pending = PendingKeys.first_seen(pa.array(keys, pa.string()))
    return {item.key: item for item in work.items()}


def recount(progress: Progress, reason: str, answered: int) -> None:
    """A row another model answered is one row, as in realtime: a fallback's answer takes the
    place of the failure counted when the row's batch was collected (in this run, or not at all),
    an escalation's answer the place of the answer it replaces."""
    moved = min(answered, progress.failed) if reason == "fallback" else answered
    if reason == "fallback":
        progress.failed -= moved
    else:
        progress.succeeded -= moved
    progress.done -= moved
