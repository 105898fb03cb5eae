"""The job spec (YAML, version 1) as strict pydantic models.

Unknown keys are errors (`extra="forbid"`), field docstrings become the descriptions in the
generated JSON Schema (`schemas/batchor-spec.schema.json`) that editors use for autocomplete.
The job's top-level blocks are here; the model block is in spec/model_block.py, the steps in
spec/steps.py (both importable from here).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from batchor.spec.model_block import (
    FALLBACK_CONDITIONS,
    FallbackCondition,
    ModelOverride,
    ModelSpec,
    PriceSpec,
    model_ref,
)
from batchor.spec.steps import (
    STEP_TAGS,
    BlockSpec,
    CanonicalPrompt,
    CheckSpec,
    EmbedStep,
    EscalateSpec,
    GatherSpec,
    LLMStep,
    ReduceSpec,
    ReduceStep,
    ResolveStep,
    ResolveStepSpec,
    SchemaOutput,
    SimilarSpec,
    SplitStep,
    SqlStep,
    StepSpec,
    ToolSpec,
)
from batchor.spec.strict import Strict as _Strict

__all__ = [
    "FALLBACK_CONDITIONS",
    "STEP_TAGS",
    "BlockSpec",
    "CacheSpec",
    "CanonicalPrompt",
    "CheckSpec",
    "EmbedStep",
    "EscalateSpec",
    "FallbackCondition",
    "GatherSpec",
    "InputSpec",
    "JobSpec",
    "LLMStep",
    "LimitsSpec",
    "ModelOverride",
    "ModelSpec",
    "OutputSpec",
    "PriceSpec",
    "ReduceSpec",
    "ReduceStep",
    "ResolveSpec",
    "ResolveStep",
    "ResolveStepSpec",
    "SchemaOutput",
    "SimilarSpec",
    "SplitStep",
    "SqlStep",
    "StepSpec",
    "ToolSpec",
    "model_ref",
]


class InputSpec(_Strict):
    """Where the rows come from."""

    path: str
    """File path or glob, relative to the spec file (CSV, TSV, JSONL, Parquet, XLSX), or an
    `https://` or `s3://` object, read from a local copy pinned to its version (guides/remote-inputs.md)."""
    format: Literal["csv", "tsv", "jsonl", "parquet", "xlsx"] | None = None
    """File format; by default taken from the extension."""
    key: str | list[str] | None = None
    """Column(s) giving each row a stable identity. Default: a hash of the row's content."""
    sql: str | None = None
    """DuckDB SQL over the input, which is available as the table `input`."""
    limit: int | None = Field(default=None, ge=1)
    """Use only the first N rows (after `sql`)."""
    sample: int | None = Field(default=None, ge=1)
    """Use N rows drawn at random (seeded by `seed`, so the same rows every time)."""
    seed: int = 0
    """Seed for `sample`."""

    def key_columns(self) -> list[str]:
        if self.key is None:
            return []
        return [self.key] if isinstance(self.key, str) else list(self.key)


class OutputSpec(_Strict):
    """Where results are written."""

    path: str
    """Output file relative to the spec; format from the extension (csv, tsv, parquet, jsonl)."""
    format: Literal["csv", "tsv", "parquet", "jsonl", "json", "duckdb"] | None = None
    escape_formulas: bool = True
    """CSV/TSV: text cells starting with = + - @, a tab or a carriage return get a leading `'`, so
    spreadsheets show them as text instead of running them (plain numbers are left alone)."""
    stream: bool | None = None
    """JSONL: append each row to the file as soon as it is finished and stored, so a killed run
    leaves a valid file holding every answered row; the run's end rewrites the file in input order.
    Default: on for JSONL outputs (not with a fan-out, nor on a shared PostgreSQL run)."""


class ResolveSpec(_Strict):
    """Entity resolution: the rows are paired by `block`, the job's step judges each pair (its
    answer needs a boolean `same`), connected pairs become clusters, each with a canonical value."""

    value: str
    """The input column holding the value to resolve (a company name, an address)."""
    block: BlockSpec
    judge: str | None = None
    """The step whose answer decides a pair (default: the job's only step)."""
    canonical: Literal["most_frequent", "longest"] = "most_frequent"
    """How a cluster's canonical value is chosen among its rows' values (ties: the other rule,
    then alphabetical order)."""

    @model_validator(mode="after")
    def _no_similar(self) -> "ResolveSpec":
        if self.block.similar is not None:
            raise ValueError("block.similar needs a `resolve:` step (it reads an embed step's vectors)")
        return self


class LimitsSpec(_Strict):
    """Budget, speed and retry limits."""

    max_cost_usd: float | None = Field(default=None, ge=0)
    """Budget in USD, enforced like `--max-cost` (the lower of the two applies): refuse to start
    when the plan's upper bound is above it; while running, every attempt (re-asks included) is
    reserved at its worst case first, so recorded spend never passes it."""
    concurrency: int = Field(default=32, ge=1, le=4096)
    """Requests in flight at once."""
    rpm: int | None = Field(default=None, ge=1)
    """Requests per minute."""
    tpm: int | None = Field(default=None, ge=1)
    """Tokens per minute (input + expected output)."""
    max_attempts: int = Field(default=4, ge=1, le=50)
    """Attempts per request for transient failures and invalid outputs (429s are not counted)."""
    on_truncation: Literal["fail", "reask"] = "fail"
    """An answer cut off by the token limit fails its row (error `truncated`); `reask` asks again
    with twice the limit (up to `truncation_max_tokens`), within `max_attempts` and the budget."""
    truncation_max_tokens: int | None = Field(default=None, ge=1)
    """Largest max_tokens a truncation re-ask may send (default: 4x the step's max_tokens)."""
    request_timeout_s: float = Field(default=120.0, gt=0)
    """Timeout for one provider call."""
    max_output_tokens: int = Field(default=1024, ge=1)
    """Sent as max_tokens when the model params do not set one; bounds the cost estimate."""
    mode: Literal["realtime", "batch", "auto", "flex"] = "realtime"
    """Default execution mode for steps (`flex`: OpenAI flex processing, realtime at batch prices)."""
    batch_threshold: int = Field(default=1000, ge=1)
    """`mode: auto` uses the Batch API when a step has at least this many requests to run."""
    deadline: str | None = None
    """Results needed soon (e.g. `2h`): `mode: auto` then stays realtime (batches take up to 24 h)."""
    batch_max_requests: int | None = Field(default=None, ge=1)
    """Requests per provider batch (never above the provider's own limit)."""
    batch_max_bytes: int | None = Field(default=None, ge=1024)
    """Bytes of request lines per provider batch (never above the provider's own limit)."""
    batch_enqueued_tokens: int | None = Field(default=None, ge=1)
    """Input tokens allowed in flight in batches per model; more chunks wait for room."""
    batch_poll_s: float = Field(default=5.0, gt=0)
    """Shortest wait between two polls of one live batch when under 0.5 s (each batch is polled
    0.5 s after its submit, later at a quarter of its age, sooner when the provider's progress
    counts or the durations of earlier batches like it say it ends sooner, up to `batch_poll_max_s`)."""
    batch_poll_max_s: float = Field(default=60.0, gt=0)
    """Longest wait between two polls of one live batch."""
    prompt_cache: bool | Literal["on", "off"] = True
    """Send the providers' prompt-cache controls for each step's shared prefix (system prompt,
    static head of the prompt): `off` sends none (answers and request keys are the same either way)."""
    flex_fallback: bool = False
    """`mode: flex`: when OpenAI has no flex capacity (429 resource unavailable), send the request
    at the standard tier (priced at it) instead of waiting for flex capacity."""


class CacheSpec(_Strict):
    """How long the provider keeps a step's shared prefix in its prompt cache."""

    ttl: Literal["5m", "1h", "24h"] | None = None
    """Anthropic: `5m` (default; writes billed 1.25x input) or `1h` (2x, for batches and slow jobs);
    OpenAI: `24h` asks for extended retention on models that offer it."""
    explicit: bool | Literal["auto"] | None = None
    """Gemini: put each step's system prompt in an explicit context cache (`caches.create`),
    created at the run's first request (a batch step's: before its first job), used by every
    request of the step and deleted at the end of the run (a batch step's: once its jobs are
    collected). Every request then reads the prompt at the cached rate; the
    cache's creation and storage (per token-hour) are priced in the plan and recorded. `auto`: the
    plan uses one for a step only where it is expected to cost less than Gemini's implicit cache,
    and says why it did or did not. Unset: `auto` on batch-mode steps (the implicit cache misses
    many of a batch's lines), none in realtime (it misses only the first requests in flight);
    `false`: never."""


class JobSpec(_Strict):
    """A batchor job: input rows, LLM steps, output file, limits."""

    version: Literal[1] = 1
    """Spec format version."""
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    """Job name (letters, digits, `_.-`)."""
    description: str | None = None
    input: InputSpec
    model: ModelSpec
    steps: dict[str, StepSpec] = Field(min_length=1)
    """Named steps, run in dependency order."""
    output: OutputSpec | None = None
    """Where results go (default: out/<name>.parquet next to the spec)."""
    limits: LimitsSpec = Field(default_factory=LimitsSpec)
    state: str | None = None
    """State location: a DuckDB file path (relative to the spec) or a postgresql:// URL. Default: the
    project's `.batchor/state.duckdb` (nearest `.batchor/` at or above the spec, else its git root,
    else its folder)."""
    templates: str | None = None
    """Folder (relative to the spec, inside the project) that `{% include %}` and `{% import %}`
    read from; without it templates read no file."""
    keep_raw: bool = True
    """Keep raw request/response payloads of every attempt for audit."""
    checks: list[CheckSpec] = Field(default_factory=list)
    """Quality gates over the finished rows of the whole job (`batchor check`)."""
    cache: CacheSpec = Field(default_factory=CacheSpec)
    """Provider prompt caching of each step's shared prefix (see `limits.prompt_cache`)."""
    resolve: ResolveSpec | None = None
    """Entity resolution: the step judges candidate pairs of rows instead of rows
    (see the resolve guide)."""

    @field_validator("steps")
    @classmethod
    def _step_names(cls, steps: dict[str, Any]) -> dict[str, Any]:
        for name in steps:
            if not isinstance(name, str) or not name.isidentifier() or name == "row":
                raise ValueError(
                    f"step name '{name}' must be a Python-style identifier (letters, digits, _) "
                    "and not 'row', so templates can refer to it"
                )
        return steps

    @model_validator(mode="after")
    def _check_deps(self) -> "JobSpec":
        for name, step in self.steps.items():
            for dep in step.depends_on:
                if dep not in self.steps:
                    raise ValueError(f"step '{name}' depends on unknown step '{dep}'")
        return self
