"""The spec's steps: LLM, SQL, embedding, reduce, split and resolve steps, and what an LLM step carries
(structured output, tools, checks, escalation, gathered neighbours). A step's kind is read from its
keys (`sql:`, `embed:`, `reduce:`, `split:`, `resolve:`; otherwise an LLM step), so errors name its own keys."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from batchor.spec.model_block import ModelOverride, model_ref
from batchor.spec.strict import Strict as _Strict


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


class SimilarSpec(_Strict):
    """Candidate pairs by embedding similarity: rows whose vectors (an embed step's answers) have a
    cosine similarity at or above `threshold`, each row with at most its `top_k` nearest."""

    step: str
    """The embed step whose vectors are compared (it runs before the resolve step)."""
    threshold: float = Field(ge=-1.0, le=1.0)
    """Lowest cosine similarity of a candidate pair (for example 0.85)."""
    top_k: int = Field(default=10, ge=1, le=1000)
    """Most candidates per row (its nearest first): bounds the pairs the plan counts before the
    vectors exist (`rows x top_k`)."""


class BlockSpec(_Strict):
    """Which rows of a `resolve:` job are candidate pairs: only these pairs are judged."""

    key: str | None = None
    """DuckDB expression over a row's columns; rows with the same non-null value pair up
    (for example `lower(left(name, 4))`)."""
    on: str | None = None
    """DuckDB condition over two rows `a` and `b` (for example
    `jaro_winkler_similarity(lower(a.name), lower(b.name)) > 0.85`)."""
    similar: SimilarSpec | None = None
    """`resolve:` steps: rows whose embeddings are similar (`{step: vectors, threshold: 0.85}`)."""
    max_pairs: int | None = Field(default=None, ge=1)
    """`resolve:` steps: most candidate pairs judged. Bounds the plan's count (and cost) while the
    values are not known yet; a rule that pairs more stops the step before any pair is sent."""

    @model_validator(mode="after")
    def _one_rule(self) -> "BlockSpec":
        if sum(rule is not None for rule in (self.key, self.on, self.similar)) != 1:
            raise ValueError("give exactly one blocking rule: `key:`, `on:` or `similar:`")
        return self


class CanonicalPrompt(_Strict):
    """A cluster's canonical value asked of the model, once per cluster with several values."""

    prompt: str
    """Jinja prompt over `cluster.variants` (the distinct values, most frequent first), `cluster.rows`
    (each row's columns and earlier answers) and `cluster.id`; the answer is `{canonical: ...}`."""
    system: str | None = None


class ResolveStepSpec(_Strict):
    """How a `resolve:` step pairs its rows and names each cluster."""

    value: str
    """What is resolved: an input column (`name`) or an earlier answer (`company.name`)."""
    block: BlockSpec
    canonical: Literal["most_frequent", "longest"] | CanonicalPrompt = "most_frequent"
    """A rule over the cluster's values (ties: the other rule, then alphabetical order), or
    `{prompt: ...}`: the model picks or writes it, one request per cluster with several values."""


class ResolveStep(LLMStep):
    """Entity resolution inside a pipeline: the step's prompt judges candidate pairs of rows
    (`pair.a`, `pair.b`; its answer needs a boolean `same`), connected pairs become clusters, and
    each row's answer is `{cluster, canonical}` for later steps and the output."""

    resolve: ResolveStepSpec


def _step_kind(value: Any) -> str:
    """A step with `sql:` is a SQL step, `embed:` an embedding step, `reduce:` a reduce step,
    `split:` a split step; anything else is an LLM step (so errors name its keys)."""
    if isinstance(value, dict):
        for key in ("sql", "embed", "reduce", "split", "resolve"):
            if key in value:
                return f"{key}_step"
        return "llm_step"
    for kind, tag in ((SqlStep, "sql_step"), (EmbedStep, "embed_step"), (ReduceStep, "reduce_step")):
        if isinstance(value, kind):
            return tag
    if isinstance(value, ResolveStep):
        return "resolve_step"
    return "split_step" if isinstance(value, SplitStep) else "llm_step"


STEP_TAGS = ("llm_step", "sql_step", "embed_step", "reduce_step", "split_step", "resolve_step")
StepSpec = Annotated[
    Annotated[LLMStep, Tag("llm_step")]
    | Annotated[SqlStep, Tag("sql_step")]
    | Annotated[EmbedStep, Tag("embed_step")]
    | Annotated[ReduceStep, Tag("reduce_step")]
    | Annotated[SplitStep, Tag("split_step")]
    | Annotated[ResolveStep, Tag("resolve_step")],
    Discriminator(_step_kind),
]
