"""The job spec (YAML, version 1) as strict pydantic models.

Unknown keys are errors (`extra="forbid"`), field docstrings become the descriptions in the
generated JSON Schema (`schemas/batchor-spec.schema.json`) that editors use for autocomplete.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

PROVIDERS = ("openai", "anthropic", "gemini", "openai-compatible", "mock")
# What moves a row on to the next `fallback` model: its answers kept failing validation, it was
# refused, cut off by the token limit, the provider could not be reached, or it is out of quota.
FALLBACK_CONDITIONS = ("invalid_output", "refused", "truncated", "unreachable", "quota")
FallbackCondition = Literal["invalid_output", "refused", "truncated", "unreachable", "quota"]
_ALL_CONDITIONS: tuple[FallbackCondition, ...] = ("invalid_output", "refused", "truncated", "unreachable", "quota")
OUTPUT_FORMATS = ("csv", "tsv", "parquet", "jsonl", "json", "duckdb")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


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
    `structured`; gemini `vertexai`, `project`, `location`, `api_version`,
    `batch_inline_max_bytes`; azure `model`, `api_version`, `auth`; bedrock `region`, `structured`;
    openai, gemini and azure `keep_provider_files`."""
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


class SchemaOutput(_Strict):
    """A structured output: a JSON schema, inline or a file path."""

    schema_: dict[str, Any] | str = Field(alias="schema")
    """Inline JSON schema, or a path relative to the spec (or to a `schemas/` folder)."""
    name: str | None = None
    """Schema name sent to the provider (default: the step name)."""


class ToolSpec(_Strict):
    """A function the model may call: the call (name and arguments) is the step's answer."""

    name: str
    """The tool's name (letters, digits, `_` and `-`, up to 64, starting with a letter or `_`)."""
    description: str = ""
    """What the tool does and when to call it: the model reads it."""
    parameters: dict[str, Any] | str | None = None
    """JSON schema of the arguments (`type: object`), inline or a file path relative to the spec
    (or to a `schemas/` folder); none: the tool takes no arguments. The arguments are validated
    against it."""


class CheckSpec(_Strict):
    """A quality gate over the stored answers, run after apply and by `batchor check`.

    Give exactly one of `row`, `sql`, `distribution`, `aggregate` or `metric`. Row checks
    (`row`, `sql`) must hold for at least `min_share` of the rows; the others compare one
    figure with `max_share` or `min`/`max`. On a step, only rows that step answered count.
    """

    name: str | None = None
    """Name shown in reports (default: the expression)."""
    row: str | None = None
    """Jinja expression that must be true for each row, e.g. `classify.reply | length < 600`."""
    sql: str | None = None
    """DuckDB SQL expression that must be true for each row, e.g. `length(classify.reply) < 600`."""
    min_share: float = Field(default=1.0, ge=0, le=1)
    """Row checks: share of rows that must pass (default all)."""
    distribution: str | None = None
    """DuckDB SQL expression whose values must each stay at or below `max_share` of the rows."""
    max_share: float | None = Field(default=None, gt=0, le=1)
    """With `distribution`: the largest share one value may take, e.g. 0.8."""
    aggregate: str | None = None
    """DuckDB SQL aggregate over the rows, e.g. `avg(judge.score)`, bounded by `min`/`max`."""
    metric: str | None = None
    """A golden-label metric `<step>.<field>.<name>` (from `expected:`), bounded by `min`/`max`."""
    min: float | None = None
    max: float | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> "CheckSpec":
        kinds = [k for k in ("row", "sql", "distribution", "aggregate", "metric") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError(
                "a check needs exactly one of row, sql, distribution, aggregate, metric"
                + (f" (got {', '.join(kinds)})" if kinds else "")
            )
        if (self.distribution is None) != (self.max_share is None):
            raise ValueError("`distribution` and `max_share` go together")
        bounded = self.aggregate is not None or self.metric is not None
        if bounded and self.min is None and self.max is None:
            raise ValueError(f"`{kinds[0]}` needs a threshold: `min`, `max` or both")
        if not bounded and (self.min is not None or self.max is not None):
            raise ValueError("`min`/`max` bound an `aggregate` or a `metric`")
        return self


class EscalateSpec(_Strict):
    """A cascade: a stronger model asked again for the rows whose answer meets `when`."""

    to: str
    """The stronger model, as `provider:name` (it keeps the step's params)."""
    when: str
    """Jinja expression over the step's own answer, by the step's name, e.g. `triage.confidence < 0.7`."""

    @field_validator("to")
    @classmethod
    def _to_name(cls, value: str) -> str:
        return model_ref(value, "escalate.to")


class GatherSpec(_Strict):
    """How many neighbours, before and after: chunks of a split (as `<step>.before`,
    `<step>.after`), or neighbouring elements' answers of a step (`gather.<step>.before`)."""

    before: int = Field(default=0, ge=0, le=20)
    after: int = Field(default=0, ge=0, le=20)


class LLMStep(_Strict):
    """One LLM call per row."""

    system: str | None = None
    """System prompt (Jinja template)."""
    prompt: str
    """User prompt: a Jinja template over `row.<column>` and earlier steps' outputs."""
    output: Literal["text"] | SchemaOutput = "text"
    """`text`, or `{schema: ...}` for structured output validated locally."""
    model: ModelOverride | None = None
    """Model overrides for this step."""
    when: str | None = None
    """Jinja expression; rows where it is false skip this step (cost nothing)."""
    depends_on: list[str] = Field(default_factory=list)
    """Steps this one needs (inferred from the templates when omitted)."""
    mode: Literal["realtime", "batch", "auto", "flex"] | None = None
    """Realtime API, provider Batch API (half price) or OpenAI flex processing (realtime at batch
    prices, on models that offer it); default from `limits.mode`."""
    deadline: str | None = None
    """Overrides `limits.deadline` for this step (`mode: auto` stays realtime, or flex, when set)."""
    expected: dict[str, str] = Field(default_factory=dict)
    """Golden labels: answer field (`text` for a text step) -> input column of known answers."""
    checks: list[CheckSpec] = Field(default_factory=list)
    """Quality gates over this step's answers (only rows it answered count)."""
    allow_empty: bool = False
    """Text steps: accept an empty or whitespace-only answer. By default it is `invalid_output`,
    asked again with feedback like any rejected answer."""
    attachments: list[str] = Field(default_factory=list)
    """Files sent with the prompt (images: PNG, JPEG, WebP, GIF; PDFs), each a Jinja expression
    such as `row.photo`, giving a path (relative to the input file's folder unless absolute), an
    `https://` URL, a `data:` URI or base64 text; a list value attaches several files."""
    escalate: EscalateSpec | None = None
    """Ask a stronger model for the rows whose answer meets a condition; each row keeps one answer
    (the stronger model's where it was asked), and `_model` says which model gave it."""
    tools: list[ToolSpec] = Field(default_factory=list)
    """Functions the model answers by calling: the step's answer is the call, stored as `tool`,
    `arguments` (validated against the tool's `parameters`), `calls` (every call) and `text`.
    batchor runs no tool: the call is the result. Not with `output: {schema: ...}`."""
    tool_choice: str = "required"
    """With `tools`: `required` (a call of any of them), a tool's name (that tool), or `auto` (the
    model may answer in text instead, stored in `text`)."""
    pdf: Literal["native", "text"] = "native"
    """How PDF attachments are sent: `native` (the provider reads the file) or `text` (the text
    pypdf extracts, after the prompt: any provider, text tokens only; a scan without text fails)."""
    gather: dict[str, GatherSpec] = Field(default_factory=dict)
    """Answers of an earlier step for the neighbouring elements of this row (below a `split:` or
    a fan-out): `{notes: {before: 1, after: 1}}` lets the prompt read `gather.notes.before` (the
    answers of up to 1 element before, nearest last) and `gather.notes.after` (nearest first).
    Neighbours without an answer are left out."""


class SqlStep(_Strict):
    """A DuckDB query between LLM steps: filter rows, derive columns, join another file, or fan
    out (one row per list element).

    It reads the table `rows`: the input columns, `_row_key`, and one column per earlier step
    (a struct for structured steps: `triage.category`; text for text steps). It returns
    `_row_key`; rows it leaves out are skipped by the steps that use it, and its other columns
    become `<step>.<column>` for later templates and the output. A fan-out step may return a
    `_row_key` several times: each returned row becomes an element row `<_row_key>#<n>`.
    """

    sql: str
    depends_on: list[str] = Field(default_factory=list)
    """Steps this query reads (inferred from the step names it mentions when omitted)."""
    fan_out: bool | None = None
    """Return several rows per `_row_key` (one per list element or join match); later steps then
    run once per element. Default: on when the query calls `unnest(` or `max_fanout` is set."""
    max_fanout: int | None = Field(default=None, ge=1)
    """Most elements one row can fan out to, so `plan` can bound the cost of later steps.
    Default: the `maxItems` of the unnested list in the upstream step's schema, if any."""

    @model_validator(mode="after")
    def _bound_needs_fan_out(self) -> "SqlStep":
        if self.fan_out is False and self.max_fanout is not None:
            raise ValueError("max_fanout bounds a fan-out: remove it or drop `fan_out: false`")
        return self


class EmbedStep(_Strict):
    """One embedding per row: the rendered `embed:` text becomes a vector of floats.

    Texts are sent many per call (OpenAI up to 2,048 inputs and 300,000 tokens a call, Gemini
    100), each cached under its own request key: the same text is never paid for twice. The
    output column is a fixed-size float list (Parquet, DuckDB; JSON text in CSV), and later SQL
    steps read it as `FLOAT[n]` for DuckDB's array functions (`array_cosine_similarity`).
    """

    embed: str
    """The text to embed: a Jinja template over `row.<column>` and earlier steps' outputs."""
    model: ModelOverride | None = None
    """Model overrides for this step (an embedding model, e.g. text-embedding-3-small)."""
    dimensions: int | None = Field(default=None, ge=1)
    """Vector size, for models that can shorten theirs (OpenAI text-embedding-3-*, Gemini
    gemini-embedding-001); default: the model's full size."""
    when: str | None = None
    """Jinja expression; rows where it is false skip this step (cost nothing)."""
    depends_on: list[str] = Field(default_factory=list)
    """Steps this one needs (inferred from the template when omitted)."""
    mode: Literal["realtime", "batch", "auto"] | None = None
    """Realtime API or provider Batch API (half price); default from `limits.mode`."""
    deadline: str | None = None
    """Overrides `limits.deadline` for this step (`mode: auto` stays realtime when set)."""
    group_size: int | None = Field(default=None, ge=1)
    """Most texts per realtime call (never above the provider's limit)."""


class ReduceSpec(_Strict):
    """How a `reduce:` step groups its rows and folds a group too long for one request."""

    group_by: list[str] = Field(min_length=1)
    """Columns (`product`) or earlier answers (`triage.category`) whose values make a group."""
    keep: Literal["groups", "rows"] = "groups"
    """`groups`: one row per group, written beside the output (`<output>.<step>.<ext>`); `rows`:
    also broadcast the group's answer back to each of its rows in the output."""
    fold_prompt: str | None = None
    """Prompt that combines partial answers of a group too long for the context window (Jinja
    sees `group.rows` = the partial answers, `group.key`). Default: the step's own prompt."""


class ReduceStep(LLMStep):
    """One LLM call per group of rows (its `prompt` sees `group.rows` and `group.key`); a group
    larger than the model's context window is answered in parts, then folded into one answer."""

    reduce: ReduceSpec


class SplitStep(_Strict):
    """Cut a long text into chunks: each chunk becomes an element row `<row_key>#<n>` (like a
    fan-out), and later steps see `<step>.text`, `<step>.n`, `<step>.of`, `<step>.before` and
    `<step>.after`."""

    split: str
    """The text to cut: a Jinja template, e.g. `{{ row.body }}`."""
    chunk_tokens: int = Field(ge=16)
    """Most tokens per chunk, counted with the job model's tokenizer (the plan's counter)."""
    overlap_tokens: int = Field(default=0, ge=0)
    """Tokens each chunk repeats from the end of the one before it."""
    delimiter: str | None = None
    """Cut only at this delimiter (e.g. a blank line), packing whole pieces up to `chunk_tokens`;
    a piece longer than that is cut by tokens. Default: cut by tokens anywhere."""
    gather: GatherSpec = Field(default_factory=GatherSpec)
    """Neighbouring chunks each chunk carries as context: `{before: 1, after: 1}`."""
    depends_on: list[str] = Field(default_factory=list)
    """Steps the template reads (inferred from the template when omitted)."""

    @model_validator(mode="after")
    def _overlap_below_chunk(self) -> "SplitStep":
        if self.overlap_tokens >= self.chunk_tokens:
            raise ValueError("overlap_tokens must be smaller than chunk_tokens")
        return self


def _step_kind(value: Any) -> str:
    """A step with `sql:` is a SQL step, `embed:` an embedding step, `reduce:` a reduce step,
    `split:` a split step; anything else is an LLM step (so errors name its keys)."""
    if isinstance(value, dict):
        for key in ("sql", "embed", "reduce", "split"):
            if key in value:
                return f"{key}_step"
        return "llm_step"
    for kind, tag in ((SqlStep, "sql_step"), (EmbedStep, "embed_step"), (ReduceStep, "reduce_step")):
        if isinstance(value, kind):
            return tag
    return "split_step" if isinstance(value, SplitStep) else "llm_step"


STEP_TAGS = ("llm_step", "sql_step", "embed_step", "reduce_step", "split_step")
StepSpec = Annotated[
    Annotated[LLMStep, Tag("llm_step")]
    | Annotated[SqlStep, Tag("sql_step")]
    | Annotated[EmbedStep, Tag("embed_step")]
    | Annotated[ReduceStep, Tag("reduce_step")]
    | Annotated[SplitStep, Tag("split_step")],
    Discriminator(_step_kind),
]


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


class BlockSpec(_Strict):
    """Which rows of a `resolve:` job are candidate pairs: only these pairs are judged."""

    key: str | None = None
    """DuckDB expression over a row's columns; rows with the same non-null value pair up
    (for example `lower(left(name, 4))`)."""
    on: str | None = None
    """DuckDB condition over two rows `a` and `b` (for example
    `jaro_winkler_similarity(lower(a.name), lower(b.name)) > 0.85`)."""

    @model_validator(mode="after")
    def _one_rule(self) -> "BlockSpec":
        if (self.key is None) == (self.on is None):
            raise ValueError("give exactly one blocking rule: `key:` or `on:`")
        return self


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
    explicit: bool = False
    """Gemini, realtime: put each step's system prompt in an explicit context cache
    (`caches.create`), created at the run's first request, used by every request of the step and
    deleted at the end of the run. Every request then reads the prompt at the cached rate; the
    cache's storage is billed per token-hour (priced in the plan)."""


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
