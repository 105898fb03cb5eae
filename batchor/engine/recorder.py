"""The ledger of attempts: what the provider answered, judged and recorded the same way for the
realtime and the batch executors.

Every response that may be billed (accepted, rejected by validation, truncated, refused) becomes an
attempt with its tokens, its cost and its raw body (when `keep_raw`), whatever its outcome; spend is
the sum of attempts, never only of accepted answers. A response without usage is priced from the
plan's input count and the answer's length, and marked `estimated`. A row's result is written once,
when it is settled, with what its attempts in this process cost.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from batchor.engine.events import Progress
from batchor.engine.resume import feedback_record
from batchor.engine.sink import ResultSink
from batchor.errors import InvalidOutputError, ProviderError, TruncatedOutputError, UnexpectedToolCallError
from batchor.plan.model import StepPlan
from batchor.providers.base import Completion, LLMRequest, ToolCall, answer_tool, is_truncated
from batchor.schema.core import parse_structured, schema_key
from batchor.schema.feedback import EMPTY_ANSWER, reask_messages
from batchor.schema.tools import judge_calls, rejected_text

if TYPE_CHECKING:
    from batchor.engine.types import StepRuntime, WorkItem

_ERROR_CHARS = 2000


@dataclass(frozen=True, slots=True)
class Bill:
    """What one answered attempt cost."""

    input_tokens: int
    output_tokens: int
    cost: float
    estimated: bool  # the response carried no usage: tokens and cost are estimates
    cache_read_tokens: int = 0  # of input_tokens, read from the provider's prompt cache
    cache_write_tokens: int = 0  # of input_tokens, written to it
    uncached_usd: float | None = None  # what the same tokens cost without the cache (None: no cache used)


def bill(runtime: StepRuntime, completion: Completion, item: WorkItem) -> Bill:
    """Tokens and cost of one answer, from its usage or, lacking one, estimated."""
    embedding = runtime.plan.kind == "embed"  # no output tokens; a text's usage is its share of its call's
    if completion.usage_known:
        tokens_in = completion.input_tokens if embedding else completion.input_tokens or item.input_tokens
        tokens_out, estimated = completion.output_tokens, False
    else:
        tokens_in, estimated = item.input_tokens, True
        # the answer's length, else (cut off in transit) the plan's expected answer
        seen = runtime.plan.expected_output_tokens if completion.lost else (len(completion.text) + 3) // 4
        tokens_out = 0 if embedding else max(1, seen)
    if runtime.price is None:
        return Bill(tokens_in, tokens_out, 0.0, estimated)
    # Priced at the tier that served it: a flex request the provider ran at its standard tier
    # (the spec allowed the fallback) costs the standard rate.
    batch, flex = runtime.plan.mode == "batch", flex_served(runtime.plan, completion)
    if not completion.usage_known:
        return Bill(tokens_in, tokens_out, runtime.price.cost(tokens_in, tokens_out, batch=batch, flex=flex), True)
    read, write = completion.cached_input_tokens, completion.cache_write_tokens
    cost = runtime.price.cost(
        tokens_in,
        tokens_out,
        cached_input_tokens=read,
        cache_write_tokens=write,
        cache_write_1h_tokens=completion.cache_write_1h_tokens,
        batch=batch,
        flex=flex,
    )
    uncached = runtime.price.cost(tokens_in, tokens_out, batch=batch, flex=flex) if read or write else None
    return Bill(tokens_in, tokens_out, cost, estimated, read, write, uncached)


def flex_served(plan: StepPlan, completion: Completion) -> bool:
    """Whether the answer was served (and billed) at the flex tier: asked for, and not reported otherwise."""
    return plan.service_tier == "flex" and completion.service_tier in (None, "flex")


def judge(plan: StepPlan, completion: Completion) -> str:
    """The answer as stored: text, or compact JSON valid against the step's schema.

    A step with `tools:` stores the calls instead (`_judged_calls`). Raises UnexpectedToolCallError
    when the model called a tool on a step without tools (batchor runs none),
    TruncatedOutputError when the token limit cut it, InvalidOutputError when it does not match the
    schema or, on a text step without `allow_empty`, is empty."""
    if plan.tools:
        return _judged_calls(plan, completion)
    unasked = [c for c in completion.tool_calls if plan.schema is None or c.name != answer_tool(plan.name)]
    if unasked:
        raise _tool_called(unasked)
    _check_truncation(plan, completion)
    if plan.schema is None:
        if not plan.allow_empty and not completion.text.strip():
            error = InvalidOutputError(
                "the answer is empty: asked again (set `allow_empty: true` on the step to accept empty answers)"
            )
            error.rejected, error.violations = completion.text, (EMPTY_ANSWER,)
            raise error
        return completion.text
    accepted = _accepted_answers(plan.schema)
    stored = accepted.get(completion.text)
    if stored is not None:
        return stored
    value, errors = parse_structured(completion.text, plan.schema)
    if errors:
        error = InvalidOutputError("answer does not match the output schema: " + "; ".join(errors[:3]))
        error.rejected, error.violations = completion.text, tuple(errors)
        raise error
    stored = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if len(completion.text) <= _MEMO_TEXT_CHARS and len(accepted) < _MEMO_ANSWERS:
        accepted[completion.text] = stored
    return stored


def _check_truncation(plan: StepPlan, completion: Completion) -> None:
    if is_truncated(completion):
        limit = plan.params.get("max_tokens", plan.max_tokens)
        raise TruncatedOutputError(
            f"answer cut off by the token limit (max_tokens {limit}, finish reason "
            f"{completion.finish_reason}); raise max_tokens or set "
            "`limits.on_truncation: reask`"
        )


def _judged_calls(plan: StepPlan, completion: Completion) -> str:
    """A tool step's answer: its calls (or, under `tool_choice: auto`, its text) as stored JSON;
    a text answer where a call is required, or arguments the tool's schema rejects, are invalid."""
    _check_truncation(plan, completion)
    value, violations = judge_calls(plan.tools, plan.tool_choice or "required", completion.tool_calls, completion.text)
    if violations:
        error = InvalidOutputError("the answer is not a valid tool call: " + "; ".join(violations[:3]))
        error.rejected, error.violations = rejected_text(completion.tool_calls, completion.text), tuple(violations)
        raise error
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _tool_called(calls: list[ToolCall]) -> UnexpectedToolCallError:
    """The row's failure (not asked again: the same request calls the same tool); the attempt is
    recorded with its cost by the caller, as any judged answer."""
    names = ", ".join(dict.fromkeys(call.name for call in calls))
    arguments = json.dumps(calls[0].arguments, ensure_ascii=False, default=str)[:200]
    return UnexpectedToolCallError(
        f"the model answered with a tool call ({names}, arguments {arguments}) instead of an answer; "
        "batchor runs no tools: tell the model to answer directly in the prompt or system message"
    )


_MEMO_TEXT_CHARS = 512  # answers remembered once accepted: short ones (labels, scores, small records)
_MEMO_ANSWERS = 4096  # per schema; a few MB at most
_ACCEPTED: dict[str, dict[str, str]] = {}  # schema_key -> answer text -> stored output


def _accepted_answers(schema: dict[str, Any]) -> dict[str, str]:
    """Answer text -> stored output of the answers `schema` already accepted. Validation is a pure
    function of the text, and a classifying step returns the same few answers thousands of times:
    each is parsed and validated once (jsonschema costs about as much as the rest of a row)."""
    key = schema_key(schema)  # cached per schema object
    accepted = _ACCEPTED.get(key)
    if accepted is None:
        if len(_ACCEPTED) >= 64:
            _ACCEPTED.clear()
        accepted = _ACCEPTED[key] = {}
    return accepted


@dataclass(frozen=True, slots=True)
class ReaskPolicy:
    """How a failed attempt is asked again (spec `limits`)."""

    on_truncation: str = "fail"  # fail | reask
    truncation_max_tokens: int | None = None  # largest max_tokens a truncation re-ask may use

    @classmethod
    def from_limits(cls, limits: Any) -> ReaskPolicy:
        return cls(
            on_truncation=str(limits.on_truncation or "fail"), truncation_max_tokens=limits.truncation_max_tokens
        )

    def next_request(self, request: LLMRequest, error: ProviderError, step_max_tokens: int) -> LLMRequest | None:
        """The request for the next attempt after `error`, or None when asking again cannot help.

        A rejected answer is asked again with feedback (the answer and what broke which rule); a
        transient failure sends the same request again; a truncated one with twice the limit, up to
        the step's ceiling (`step_max_tokens` is the step's own limit)."""
        if isinstance(error, TruncatedOutputError):
            return self._larger(request, step_max_tokens)
        if isinstance(error, InvalidOutputError) and error.rejected is not None:
            return replace(request, messages=reask_messages(request.messages, error.rejected, error.violations))
        return request if error.transient else None

    def truncation_ceiling(self, step_max_tokens: int) -> int:
        """The largest limit a truncation re-ask of a step may send: `truncation_max_tokens`, else
        four times the step's own (what the plan's "if every request used them all" bound counts);
        taken from the step, never from the attempt, so doubling stops there."""
        return self.truncation_max_tokens or 4 * step_max_tokens

    def _larger(self, request: LLMRequest, step_max_tokens: int) -> LLMRequest | None:
        if self.on_truncation != "reask":
            return None
        current = int(request.params.get("max_tokens") or step_max_tokens)
        larger = min(current * 2, self.truncation_ceiling(step_max_tokens))
        if larger <= current:
            return None
        return replace(request, params={**request.params, "max_tokens": larger})


class Recorder:
    """Writes attempts and row results into the sink and keeps the progress counters."""

    def __init__(self, sink: ResultSink, progress: Progress) -> None:
        self.sink, self.progress = sink, progress
        self._spent: dict[str, float] = {}  # rows with billed attempts, until their result is written
        self._models: dict[str, str] = {}  # the model each request in progress was sent to

    def _model_of(self, item: WorkItem, runtime: StepRuntime) -> str:
        model = self._models[item.key] = f"{runtime.plan.provider}:{runtime.plan.model}"
        return model

    def answer(
        self,
        item: WorkItem,
        runtime: StepRuntime,
        attempt: int,
        completion: Completion,
        *,
        duration_ms: int = 0,
        raw: bytes | None = None,
        counted: bool = True,
    ) -> tuple[str | None, ProviderError | None, float]:
        """Judge an answer and record it as a billed attempt: (output, rejection, cost)."""
        try:
            output, error = judge(runtime.plan, completion), None
        except (InvalidOutputError, TruncatedOutputError, UnexpectedToolCallError) as exc:
            output, error = None, exc
        cost = self.billed(item, runtime, attempt, completion, error, duration_ms=duration_ms, raw=raw, counted=counted)
        return output, error, cost

    def billed(
        self,
        item: WorkItem,
        runtime: StepRuntime,
        attempt: int,
        completion: Completion,
        error: ProviderError | None,
        *,
        duration_ms: int = 0,
        raw: bytes | None = None,
        counted: bool = True,
    ) -> float:
        """Record an answer the provider billed, accepted (`error` None) or not; its cost."""
        spent = bill(runtime, completion, item)
        self.sink.add_attempt(
            key=item.key,
            attempt=attempt,
            outcome="ok" if error is None else error.code,
            status_code=(error.status if error is not None else None) or 200,
            error=error.message[:_ERROR_CHARS] if error is not None else None,
            duration_ms=duration_ms,
            raw=self._raw(completion, raw),
            input_tokens=spent.input_tokens,
            output_tokens=spent.output_tokens,
            cost_usd=spent.cost,
            estimated=spent.estimated,
            step=item.step,
            # a first attempt sends the planned request: its count calibrates the plan's
            counted_input_tokens=item.input_tokens if attempt == 1 else None,
            feedback=feedback_record(error),
            cache_read_tokens=spent.cache_read_tokens,
            cache_write_tokens=spent.cache_write_tokens,
            uncached_usd=spent.uncached_usd,
            model=self._model_of(item, runtime),
        )
        self._spent[item.key] = self._spent.get(item.key, 0.0) + spent.cost
        if counted:
            self.progress.add_spend(
                spent.cost,
                spent.input_tokens,
                spent.output_tokens,
                wasted=error is not None,
                estimated=spent.estimated,
                step=item.step,
            )
        return spent.cost

    def call_failed(
        self,
        item: WorkItem,
        runtime: StepRuntime,
        attempt: int,
        error: ProviderError,
        *,
        duration_ms: int = 0,
        counted: bool = True,
    ) -> float | None:
        """Record a call that raised: billed when the error carries an answer (a refusal), else
        free. Returns the cost, or None when nothing was billed."""
        if error.completion is not None:
            return self.billed(
                item, runtime, attempt, error.completion, error, duration_ms=duration_ms, counted=counted
            )
        self.sink.add_attempt(
            key=item.key,
            attempt=attempt,
            outcome=error.code,
            status_code=error.status,
            error=error.message[:_ERROR_CHARS],
            duration_ms=duration_ms,
            step=item.step,
            model=self._model_of(item, runtime),
        )
        return None

    def succeed(
        self,
        item: WorkItem,
        attempts: int,
        output: str,
        completion: Completion,
        counted: bool = True,
        fallback_for: str | None = None,
        **link: str,
    ) -> None:
        """The row's accepted answer (its cost: every attempt it took here); `fallback_for`: the
        request of the row's own model it answers instead (engine/fallback.py)."""
        self.sink.add_result(
            key=item.key,
            step=item.step,
            status="succeeded",
            output=output,
            error_code=None,
            error=None,
            attempts=attempts,
            input_tokens=completion.input_tokens or item.input_tokens,
            output_tokens=completion.output_tokens,
            cost_usd=self._spent.pop(item.key, 0.0),
            model=self._models.pop(item.key, None),
            fallback_for=fallback_for,
            **link,  # a cheap answer an escalation replaced: `answered_by` and its `answer`
        )
        if counted:
            self.progress.count_success(item.step)

    def fail(
        self, item: WorkItem, attempts: int, error: ProviderError, counted: bool = True, row_end: bool = True
    ) -> None:
        """The row failed for good (its cost: every attempt it took here, all wasted); `row_end`
        False: a fallback model's failure, stored, while the row moves on to the next one."""
        if not counted:  # a row of another job's batch: that job records its own failures
            self._spent.pop(item.key, None)
            self._models.pop(item.key, None)
            return
        self._failed(item, attempts, error)
        if row_end:
            self.progress.count_failure(item.step)

    def fell_back(self, item: WorkItem, attempts: int, error: ProviderError, answered_by: str, answer: str) -> None:
        """The row's own model failed it and the fallback request `answered_by` answered it: the
        failure is stored under its own key (the cache never gives one model's answer for another's
        request), linked to the answer that rows read instead."""
        self._failed(item, attempts, error, answered_by=answered_by, answer=answer)

    def _failed(self, item: WorkItem, attempts: int, error: ProviderError, **link: str) -> None:
        self.sink.add_result(
            key=item.key,
            step=item.step,
            status="failed",
            output=None,
            error_code=error.code,
            error=error.message[:_ERROR_CHARS],
            attempts=attempts,
            input_tokens=0,
            output_tokens=0,
            cost_usd=self._spent.pop(item.key, 0.0),
            model=self._models.pop(item.key, None),
            **link,
        )

    def _raw(self, completion: Completion, raw: bytes | None) -> bytes | None:
        """The body as received (a batch line) or as parsed, only when raw bodies are kept."""
        if not self.sink.keep_raw:
            return None
        if raw is None and completion.raw:
            raw = json.dumps(completion.raw, separators=(",", ":")).encode()
        return raw
