"""One request, one implementation: a step's request for a row, rendered and keyed.

Planning (root and dependent steps), apply (`engine/work.py`) and row-level pipelining
(`engine/pipeline.py`) all render through `StepRequests`, so a row gets the same request key and
the same body whichever path rendered it, and `llm_request` builds what is sent from exactly the
messages that were keyed. The column-wise fast path (`column_render.py`) builds the same bodies for
simple templates without Jinja and keys them with `StepRequests.keys`; tests/plan/test_request.py
holds the two (and the three callers) to identical results.

A step with `attachments:` adds references to its files to the first user message
(`plan/attachments.py`); the key hashes their content, not where they are (`keyed_view`), and
`llm_request` loads the bytes that are sent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from batchor.fingerprint import canonical_json, request_key_from_json
from batchor.plan.attachments import ATTACHMENTS, AttachmentContext, describe_row, keyed_view, load
from batchor.plan.image_tokens import attachment_tokens
from batchor.plan.model import StepPlan
from batchor.plan.pdf_text import is_text, text_block
from batchor.plan.prompt_cache import cache_control
from batchor.plan.tokens import get_counter, schema_tokens, tools_tokens
from batchor.providers.base import LLMRequest
from batchor.providers.facts import provider_facts
from batchor.spec.templates import StepTemplates, compile_step, make_environment, render_error, templates_folder


@dataclass(frozen=True, slots=True)
class RenderedRequest:
    """A row's request: its key, its messages, and their canonical JSON (what the key hashes,
    less the attachments' locations)."""

    key: str
    body: str
    messages: tuple[dict[str, Any], ...]


class StepRequests:
    """Renders and keys one step's requests; `render` is the only place a row becomes a request."""

    def __init__(self, step: StepPlan, templates: StepTemplates) -> None:
        self.step, self.templates = step, templates
        self.counter = get_counter(step.provider, step.model)
        self.fixed_tokens = _fixed_tokens(step, self.counter)  # billed on every request besides its messages
        self.media = (
            AttachmentContext(
                Path(step.attachments_folder or "."), step.media_rules or step.provider, pdf_text=step.pdf_text
            )
            if step.attachments
            else None
        )
        self.problems = 0  # requests whose attachments cannot be sent (they fail without a call)
        self.problem_examples: list[str] = []  # the first few, naming the row and the file

    def render(self, row_key: str, context: dict[str, Any]) -> RenderedRequest | None:
        """The row's request, or None when the step's `when:` skips it; a failure names the row."""
        try:
            if not self.templates.should_run(context):
                return None
            messages: list[dict[str, Any]] = list(self.templates.render_messages(context))
            values = self.templates.render_attachments(context) if self.media is not None else []
        except Exception as exc:  # noqa: BLE001 - any render failure names the step and row
            raise render_error(self.step.name, exc, row_key) from None
        if self.media is None:
            body = canonical_json(messages)
            return RenderedRequest(request_key_from_json(self.step.key_prefix, body), body, tuple(messages))
        refs = describe_row(values, row_key, self.media)
        problem = next((ref["detail"] for ref in refs if "error" in ref), None)
        if problem is not None:
            self.problems += 1
            self.problem_examples += [problem][: 3 - len(self.problem_examples)]
        user = next(i for i, m in enumerate(messages) if m["role"] == "user")
        keyed = [*messages[:user], {**messages[user], ATTACHMENTS: keyed_view(refs)}, *messages[user + 1 :]]
        messages[user] = {**messages[user], ATTACHMENTS: refs}
        key = request_key_from_json(self.step.key_prefix, canonical_json(keyed))
        return RenderedRequest(key, canonical_json(messages), tuple(messages))

    def tokens(self, requests: Sequence[RenderedRequest | None]) -> list[int | None]:
        """Input tokens per request (None where there is none), counted in one batch: the text,
        plus each attachment by its provider's rule."""
        present = [r for r in requests if r is not None]
        if self.step.kind == "embed":  # the text alone: an embedding request has no chat overhead
            texts = iter(self.counter.count_batch([embed_text(r.messages) for r in present]))
            return [next(texts) if r is not None else None for r in requests]
        counts = iter(self.counter.count_messages_batch([r.messages for r in present]))
        fixed = self.fixed_tokens
        return [
            next(counts) + fixed + sum(self._ref_tokens(a) for a in _refs(r.messages)) if r is not None else None
            for r in requests
        ]

    def _ref_tokens(self, ref: dict[str, Any]) -> int:
        """A file's tokens by its provider's rule; a PDF sent as text, its text's."""
        if is_text(ref):
            return self.counter.count(ref["text"]) + 20  # the block's header line
        return attachment_tokens(self.media.provider if self.media is not None else "", ref)

    def attachment_tokens(self, context: dict[str, Any]) -> int:
        """Tokens of the attachments `context` gives (projections of rows not rendered yet)."""
        if self.media is None:
            return 0
        refs = describe_row(self.templates.render_attachments(context), "projection", self.media)
        return sum(self._ref_tokens(ref) for ref in refs)

    def keys(self, bodies: Sequence[str]) -> list[str]:
        """Keys of many canonical bodies at once (the fast path): the hash `render` computes."""
        return request_keys(self.step.key_prefix, bodies)


def request_key_for(step: StepPlan, messages: Sequence[dict[str, Any]]) -> str:
    """The key of rendered `messages` sent to `step`'s model: what `StepRequests.render` keys (the
    attachments by content), so a fallback model's request has its own model's key."""
    keyed = [{**m, ATTACHMENTS: keyed_view(m[ATTACHMENTS])} if ATTACHMENTS in m else m for m in messages]
    return request_key_from_json(step.key_prefix, canonical_json(keyed))


def _fixed_tokens(step: StepPlan, counter: Any) -> int:
    """What each request bills besides its messages: the tool definitions (every provider), and the
    structured-output schema OpenAI bills as input (exact counts only: another provider's reported
    count calibrates its estimate, schema included)."""
    tools = tools_tokens(counter, step.tools, step.provider, step.tool_choice) if step.tools else 0
    if not provider_facts(step.provider).schema_billed or not step.token_count_exact or step.kind == "embed":
        return tools
    return tools + schema_tokens(counter, step.sent_schema)


def request_keys(prefix: str, bodies: Sequence[str]) -> list[str]:
    """`request_key_from_json` for many bodies (same hash, without the per-call overhead)."""
    head = (prefix + "\x1f").encode("utf-8")
    sha = hashlib.sha256
    return [sha(head + body.encode("utf-8")).hexdigest()[:32] for body in bodies]


def pinned_requests(step: StepPlan, base_dir: str, templates: str | None = None) -> StepRequests:
    """A step's renderer from the templates pinned in a plan (apply and pipelining); `templates`
    the spec's `templates:` folder, relative to `base_dir`."""
    env = make_environment(templates_folder(Path(base_dir), templates))
    names = set(step.depends_on) | ({"gather"} if step.gather else set())  # neighbours' answers (plan/gather.py)
    compiled = compile_step(env, step.name, step.system, step.prompt, step.when, names, step.attachments)
    return StepRequests(step, compiled)


def llm_request(step: StepPlan, key: str, messages: tuple[dict[str, Any], ...]) -> LLMRequest:
    """What is sent for a request: the keyed messages with the step's pinned params and schema,
    and the attachments' bytes (an `AttachmentError` when one cannot be sent: the row fails)."""
    refs = _refs(messages)
    cache, tier = cache_control(step), step.service_tier  # how it is sent, not what: neither is keyed
    if not refs and not any(ATTACHMENTS in m for m in messages):
        return LLMRequest(
            key,
            step.model,
            messages,
            step.params,
            step.sent_schema,
            step.name,
            tools=step.tools,
            tool_choice=step.tool_choice,
            cache=cache,
            service_tier=tier,
            tier_fallback=step.flex_fallback,
        )
    plain = tuple({k: v for k, v in m.items() if k != ATTACHMENTS} for m in messages)
    files = load(refs)  # raises for a planned problem first, whatever else the row carries
    texts = [text_block(ref, n) for n, ref in enumerate((r for r in refs if is_text(r)), 1)]
    if texts:  # PDFs sent as text follow the prompt in the first user message
        user = next(i for i, m in enumerate(plain) if m["role"] == "user")
        joined = "\n\n".join([plain[user]["content"], *texts])
        plain = (*plain[:user], {**plain[user], "content": joined}, *plain[user + 1 :])
    return LLMRequest(
        key,
        step.model,
        plain,
        step.params,
        step.sent_schema,
        step.name,
        attachments=files,
        tools=step.tools,
        tool_choice=step.tool_choice,
        cache=cache,
        service_tier=tier,
    )


def embed_text(messages: Sequence[dict[str, Any]]) -> str:
    """The text an embedding request embeds: its one user message."""
    return str(messages[-1]["content"])


def _refs(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [ref for m in messages for ref in m.get(ATTACHMENTS) or ()]
