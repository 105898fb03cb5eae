"""The spec's `model:` block and a step's `model:` overrides: which model answers, how to reach it,
its price, and the models asked when it cannot answer (`fallback`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from batchor.spec.strict import Strict as _Strict

# What moves a row on to the next `fallback` model: its answers kept failing validation, it was
# refused, cut off by the token limit, the provider could not be reached, or it is out of quota.
FALLBACK_CONDITIONS = ("invalid_output", "refused", "truncated", "unreachable", "quota")
FallbackCondition = Literal["invalid_output", "refused", "truncated", "unreachable", "quota"]
_ALL_CONDITIONS: tuple[FallbackCondition, ...] = ("invalid_output", "refused", "truncated", "unreachable", "quota")


class PriceSpec(_Strict):
    """A price for a model the built-in table does not know (USD per million tokens)."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    cached_input_per_mtok: float | None = Field(default=None, ge=0)
    batch_input_per_mtok: float | None = Field(default=None, ge=0)
    batch_output_per_mtok: float | None = Field(default=None, ge=0)


class ModelSpec(_Strict):
    """Which model answers, and how to reach it."""

    provider: str
    """openai | anthropic | gemini | azure | bedrock | openai-compatible | mock (or an OpenAI-compatible preset)."""
    name: str
    """The provider's model name, e.g. gpt-4.1-mini."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Sampling parameters sent with every request: temperature, max_tokens, top_p, seed, ..."""
    base_url: str | None = None
    """API base URL; for openai also read from OPENAI_BASE_URL."""
    api_key_env: str | None = None
    """Environment variable holding the API key (default per provider, e.g. OPENAI_API_KEY). Another
    name than the provider's own needs `allow_key_env: true`."""
    allow_key_env: bool = False
    """Let `api_key_env` name a variable that is not the provider's own (plan and apply show it)."""
    api: Literal["chat", "responses"] | None = None
    """OpenAI only: Chat Completions (default) or the Responses API."""
    price: PriceSpec | None = None
    """Price override; with it, a model the price table does not know is accepted."""
    custom: bool = False
    """A model the price table and the provider's model list do not know (a fine-tune, a gateway
    alias, a new model, any model of an `openai-compatible` endpoint): accepted as written. Without
    `price:` it is unpriced, and `--max-cost` refuses it."""
    context_window: int | None = Field(default=None, ge=1)
    """Context window in tokens (known models have a default); longer rows fail alone."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Provider-specific settings, checked per provider (docs: guides/providers.md): anthropic
    `structured`; gemini `vertexai`, `project`, `location`, `batch_gcs`,
    `api_version`, `batch_inline_max_bytes`; azure `model`, `api_version`, `auth`; bedrock `region`, `structured`,
    `batch_s3`, `role_arn`, `batch_min_records`; openai, gemini, azure and bedrock `keep_provider_files`."""
    fallback: list[str] = Field(default_factory=list)
    """Models asked in turn, as `provider:name`, for a row this model could not answer (see
    `fallback_on`); each keeps this block's params. The output's `_model` column names the one that answered."""
    fallback_on: list[FallbackCondition] = Field(default_factory=lambda: list(_ALL_CONDITIONS))
    """Which failures move a row on to the next fallback model: `invalid_output` (after its
    attempts), `refused`, `truncated`, `unreachable` (after its attempts), `quota` (default: all)."""

    @field_validator("fallback")
    @classmethod
    def _fallback_names(cls, value: list[str]) -> list[str]:
        return [model_ref(item, "fallback") for item in value]

    @field_validator("name")
    @classmethod
    def _name_not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("model name must not be empty")
        return value


class ModelOverride(_Strict):
    """Per-step changes to the job's model block."""

    provider: str | None = None
    name: str | None = None
    params: dict[str, Any] | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    allow_key_env: bool | None = None
    api: Literal["chat", "responses"] | None = None
    price: PriceSpec | None = None
    custom: bool | None = None
    context_window: int | None = Field(default=None, ge=1)
    options: dict[str, Any] | None = None
    fallback: list[str] | None = None
    fallback_on: list[FallbackCondition] | None = None

    @field_validator("fallback")
    @classmethod
    def _fallback_names(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else [model_ref(item, "fallback") for item in value]


def model_ref(value: str, where: str) -> str:
    """A `provider:name` reference to another model (fallback, escalate)."""
    provider, _, name = value.partition(":")
    if not provider.strip() or not name.strip():
        raise ValueError(f"{where} model '{value}' must be provider:name, e.g. anthropic:claude-haiku-4-5")
    return value
