"""Realtime embedding steps: many texts per call, each text still its own request.

The realtime executor's producer cuts an embedding step's work items into `WorkGroup`s within
the provider's limits (OpenAI 2,048 texts and 300,000 tokens a call, Gemini 100; a step's
`group_size` lowers them), so 100,000 rows take about 50 calls, not 100,000. A group is sent like
one row: budget reserved first, paced by the limiter, 429s waited out, transient errors retried.

Each text keeps its own request key, attempts and result. An answered call is billed once and
its cost split over its texts by their token counts (the call's usage shared in proportion to
the plan's counts), so every text's attempt carries its share and the shares add up to the
call. A text whose vector is missing or the wrong size is retried in a smaller group; a call
refused as a whole (400: one text too long, say) is split in halves until the bad text fails
alone, so one bad row never costs the others their answer; a refusal that every half and a short
text alone get too is the request's fault, and every text fails with it after four calls.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator

from batchor.engine.retry import maybe_billed
from batchor.engine.types import StepRuntime, WorkItem
from batchor.errors import (
    ContextLengthError,
    InvalidOutputError,
    InvalidRequestError,
    ProviderError,
    RateLimitedError,
)
from batchor.plan.context import too_long
from batchor.plan.embed_models import GroupLimits, group_limits
from batchor.plan.model import StepPlan
from batchor.plan.request import embed_text
from batchor.providers import provider_info
from batchor.providers.base import Completion, Embedder, Embeddings, EmbedRequest
from batchor.providers.embeddings import vector_json

if TYPE_CHECKING:
    from batchor.engine.budget import Hold
    from batchor.engine.realtime import RealtimeExecutor
    from batchor.engine.seats import Seat


@dataclass(slots=True)
class WorkGroup:
    """Texts of one embedding step sent in one call."""

    step: str
    items: list[WorkItem] = field(default_factory=list)
    tokens: int = 0

    @property
    def key(self) -> str:
        return self.items[0].key


class Grouper:
    """Cuts the work items of embedding steps into groups; other items pass through."""

    def __init__(self, steps: dict[str, StepRuntime]) -> None:
        self.limits: dict[str, GroupLimits] = {
            name: group_limits(r.plan.provider, provider_info(r.plan.provider).adapter, r.plan.group_size)
            for name, r in steps.items()
            if r.plan.kind == "embed"
        }
        self.open: dict[str, WorkGroup] = {}

    def add(self, item: WorkItem) -> Iterator[WorkItem | WorkGroup]:
        """What is ready to send once `item` is in: the item itself, a full group, or nothing yet."""
        limits = self.limits.get(item.step)
        if limits is None:
            yield item
            return
        group = self.open.setdefault(item.step, WorkGroup(item.step))
        if group.items and limits.tokens is not None and group.tokens + item.input_tokens > limits.tokens:
            yield self.open.pop(item.step)
            group = self.open.setdefault(item.step, WorkGroup(item.step))
        group.items.append(item)
        group.tokens += item.input_tokens
        if len(group.items) >= limits.inputs:
            yield self.open.pop(item.step)

    def rest(self) -> list[WorkGroup]:
        """The groups not full when the items ran out."""
        groups, self.open = list(self.open.values()), {}
        return groups


def unsendable_text(plan: StepPlan, item: WorkItem) -> ProviderError | None:
    """Why a text cannot be embedded (empty, or beyond the model's token limit), else None: the
    row fails alone before any call, in realtime and batch alike."""
    if not embed_text(item.messages).strip():
        return InvalidRequestError("the text to embed is empty (not sent)")
    if too_long(item.input_tokens, 0, plan.context_window):
        return ContextLengthError(
            f"text has {item.input_tokens} tokens, more than the {plan.context_window} {plan.model} embeds (not sent)"
        )
    return None


def group_upper_cost(runtime: StepRuntime, items: list[WorkItem]) -> float:
    """Worst case of one call for `items` (input tokens only: embeddings have no output)."""
    if runtime.price is None:
        return 0.0
    tokens = int(sum(i.input_tokens for i in items) * runtime.plan.token_upper_factor)
    return runtime.price.cost(tokens, 0, batch=False)


class GroupSender:
    """Sends one group through the executor's budget, limiter, seats and recorder."""

    def __init__(self, ex: RealtimeExecutor, runtime: StepRuntime, hold: Hold, seat: Seat) -> None:
        self.ex, self.runtime, self.hold, self.seat = ex, runtime, hold, seat
        self.plan = runtime.plan

    async def send(self, group: WorkGroup) -> None:
        """Rows that cannot be sent fail alone (before any call); the others go in one call."""
        ready = []
        for item in group.items:
            problem = self._unsendable(item)
            if problem is None:
                ready.append(item)
            else:
                self.ex.recorder.fail(item, 0, problem)
        if ready:
            await self._send(ready, 1)

    def _unsendable(self, item: WorkItem) -> ProviderError | None:
        return unsendable_text(self.plan, item)

    async def _send(self, items: list[WorkItem], attempt: int, split: bool = True) -> ProviderError | None:
        """Attempts of `items` together until each is answered or failed, or the run stops.
        With `split` off, a refusal of the whole call is returned with its items left unrecorded
        (the caller decides whether the texts or the request are to blame)."""
        while items:
            if not await self.ex._reserve(self.hold, group_upper_cost(self.runtime, items)):
                return None  # budget reached: the rows stay pending
            error, items = await self._attempt(items, attempt)
            if error is None or not items:
                return None
            if _splittable(error) and not split:
                return error
            if _splittable(error) and len(items) > 1:  # refused as a whole: find the text it refuses
                await self._split(items, attempt + 1, error)
                return None
            if not error.transient or attempt >= self.ex.max_attempts:
                for item in items:
                    self.ex.recorder.fail(item, attempt, error)
                return None
            if self.ex.stop.stopped:
                return None  # it could be tried again, but the run stops: the texts stay pending
            self.ex.progress.retries += len(items)
            await self.seat.wait(self.ex.sleep, _backoff(self.ex, attempt, error))
            if self.ex.stop.stopped:
                return None
            attempt += 1
        return None

    async def _split(self, items: list[WorkItem], attempt: int, refusal: ProviderError) -> None:
        """Halves until the refused text fails alone. When both halves get the parent's refusal,
        up to three texts spread over the group are tried alone: if each gets it too, the request
        is to blame, not a text (a bad parameter, say), and every text fails with it after at most
        six calls rather than one call per split."""
        half = len(items) // 2
        parts = [items[:half], items[half:]]
        refusals = [await self._send(part, attempt, split=False) for part in parts]
        if all(_same_refusal(r, refusal) for r in refusals):
            probed, request_refused = await self._probe(items, attempt + 1, refusal)
            if request_refused:
                for item in items:
                    self.ex.recorder.fail(item, attempt + 1, refusal)
                return
            parts = [[item for item in part if all(item is not p for p in probed)] for part in parts]
        for part, part_refusal in zip(parts, refusals):
            if part_refusal is None or not part:
                continue
            if len(part) == 1:
                self.ex.recorder.fail(part[0], attempt, part_refusal)
            else:
                await self._split(part, attempt + 1, part_refusal)

    async def _probe(self, items: list[WorkItem], attempt: int, refusal: ProviderError) -> tuple[list[WorkItem], bool]:
        """Texts sent alone until one is not refused like the group: (the texts sent, whether all
        were). A text refused alone is failed, unless all were (the request's fault, failed above)."""
        picks = [items[0], items[len(items) // 2], items[-1]]
        probes = [item for i, item in enumerate(picks) if all(item is not p for p in picks[:i])]
        refused: list[tuple[WorkItem, ProviderError]] = []
        for n, probe in enumerate(probes, 1):
            alone = await self._send([probe], attempt, split=False)
            if alone is not None:
                refused.append((probe, alone))
            if not _same_refusal(alone, refusal):
                for item, error in refused:
                    self.ex.recorder.fail(item, attempt, error)
                return probes[:n], False
        return probes, True

    async def _attempt(self, items: list[WorkItem], attempt: int) -> tuple[ProviderError | None, list[WorkItem]]:
        """One call (429s waited out inside it): (error, the items it leaves without a vector)."""
        waits = 0
        request = EmbedRequest(
            self.plan.model,
            tuple(embed_text(i.messages) for i in items),
            self.plan.params.get("dimensions"),
            self.plan.dimensions,
        )
        while True:
            sent_at = await self.ex.limiter.acquire(sum(i.input_tokens for i in items))
            started = time.monotonic()
            self.ex.progress.in_flight += 1
            try:
                answer = await self.ex._call_embed(self._embedder(), request)
            except RateLimitedError as exc:
                waits += 1
                self.ex.progress.rate_limited += 1
                wait = self.ex.limiter.on_rate_limited(exc, sent_at)
                self._call_failed(items, attempt, exc, started)
                if self.ex.stop.stopped:
                    return None, items  # the run stops: the texts stay pending, not failed by a 429
                if waits > self.ex.max_rate_limit_waits:
                    return exc, items
                await self.seat.wait(self.ex.sleep, wait)
                if self.ex.stop.stopped:
                    return None, items
                continue
            except ProviderError as exc:
                self._call_failed(items, attempt, exc, started)
                kept = self.ex._beyond_the_row(exc, self.runtime)
                return kept, items if kept is not None else []
            finally:
                self.ex.progress.in_flight -= 1
            self.ex.limiter.on_success(answer.rate_limits)
            left = self._record(items, attempt, answer, int((time.monotonic() - started) * 1000))
            if left:
                return InvalidOutputError(
                    f"the answer lacked {len(left)} of {len(items)} vectors "
                    f"(or they were not {self.plan.dimensions} long)"
                ), left
            return None, []

    def _embedder(self) -> Embedder:
        provider = self.runtime.provider
        if not isinstance(provider, Embedder):
            raise InvalidRequestError(f"provider {self.plan.provider} cannot embed texts")
        return provider

    def _call_failed(self, items: list[WorkItem], attempt: int, exc: ProviderError, started: float) -> None:
        """Each text's attempt. An answer cut off or unreadable was billed (each text at an estimate),
        and a call lost after sending may have been: the reservation is spent at the call's worst
        case, as realtime.py does (a refusal or a 429 billed nothing: it stays for the next try)."""
        ms = int((time.monotonic() - started) * 1000)
        costs = [self.ex.recorder.call_failed(item, self.runtime, attempt, exc, duration_ms=ms) for item in items]
        billed = sum(c for c in costs if c is not None)
        if any(c is not None for c in costs) or maybe_billed(exc):
            self.hold.settle(max(billed, self.hold.amount if self.hold.active else 0.0))

    def _record(self, items: list[WorkItem], attempt: int, answer: Embeddings, ms: int) -> list[WorkItem]:
        """Every text's share of the billed call; the texts without a good vector are returned."""
        shares = token_shares([i.input_tokens for i in items], answer.input_tokens if answer.usage_known else None)
        left, spent = [], 0.0
        for item, vector, tokens in zip(items, answer.vectors, shares):
            good = vector is not None and (self.plan.dimensions is None or len(vector) == self.plan.dimensions)
            text = vector_json(vector) if good and vector is not None else ""
            completion = Completion(
                text=text,
                input_tokens=tokens,
                output_tokens=0,
                finish_reason="stop",
                model=answer.model,
                usage_known=answer.usage_known,
                raw={"model": answer.model, "texts_in_call": len(items), "tokens": tokens},
            )
            error = None if good else InvalidOutputError("the answer had no vector of the right size for this text")
            spent += self.ex.recorder.billed(item, self.runtime, attempt, completion, error, duration_ms=ms)
            if good:
                self.ex.recorder.succeed(item, attempt, completion.text, completion)
            else:
                left.append(item)
        self.hold.settle(spent)
        return left


def token_shares(counted: list[int], billed: int | None) -> list[int]:
    """The call's billed tokens split over its texts in proportion to their counts (largest
    remainders, so the shares add up to the bill); without usage, the counts themselves."""
    if billed is None:
        return list(counted)
    total = sum(counted)
    if total <= 0:
        base = [billed // len(counted)] * len(counted)
        base[0] += billed - sum(base)
        return base
    exact = [billed * n / total for n in counted]
    shares = [int(x) for x in exact]
    for i in sorted(range(len(exact)), key=lambda i: exact[i] - shares[i], reverse=True)[: billed - sum(shares)]:
        shares[i] += 1
    return shares


def _splittable(error: ProviderError) -> bool:
    """A call refused for what it carries (a 400-class error): one of its texts may be the cause."""
    return not error.transient and isinstance(error, InvalidRequestError) and error.status in (400, 413, 422)


def _same_refusal(error: ProviderError | None, refusal: ProviderError) -> bool:
    return error is not None and (type(error), error.status, str(error)) == (
        type(refusal),
        refusal.status,
        str(refusal),
    )


def _backoff(ex: RealtimeExecutor, attempt: int, error: ProviderError) -> float:
    from batchor.engine.retry import backoff_delay

    return backoff_delay(attempt, retry_after=error.retry_after, rng=ex.rng)
