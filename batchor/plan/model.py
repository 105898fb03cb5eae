"""The compiled plan: frozen, serialisable, hashed.

A plan file is a zip holding `plan.json` (this header) and `data.parquet` (one row per input row:
the row key, the input columns, and for each step that depends only on the row its request key,
rendered messages and input token count). `apply` executes exactly it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from batchor.plan.step_kind import StepKind, kind_of
from batchor.schema.tools import Tool
from batchor.spec.model import LimitsSpec

PLAN_FORMAT_VERSION = 1
REQ_PREFIX = "__req."


def req_column(step: str, part: str) -> str:
    """Column of the plan data holding one part (key, messages, tokens) of a step's request."""
    return f"{REQ_PREFIX}{step}.{part}"


PROJECTED = " (projected)"  # marks a `changed_by` cause counted before its requests exist (plan/changes.py)


def output_per_request(step: "StepPlan") -> float:
    """Expected output tokens per request: the measured mean unrounded, else the estimate."""
    return step.expected_output_mean if step.expected_output_mean is not None else float(step.expected_output_tokens)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StepCounts(_Frozen):
    rows: int = 0
    to_run: int = 0
    cached: int = 0
    skipped: int = 0
    input_tokens: int = 0
    output_tokens_expected: int = 0
    output_tokens_upper: int = 0
    cost_expected: float = 0.0
    cost_upper: float = 0.0
    estimated: bool = False  # token counts are estimates (non-OpenAI tokenizer or projected rows)
    projected: int = 0  # rows whose upstream answers do not exist yet (counted at the upper bound)
    too_long: int = 0  # requests over the model's context window: they fail without a call
    elements: int = 0  # fan-out steps: element rows known at plan time
    unbounded: bool = False  # projected rows below a fan-out without a bound: cost_upper is not an upper bound
    changed: int = 0  # of to_run: rows this spec answered before with a different request
    changed_by: dict[str, int] = Field(default_factory=dict)  # changed, by cause: template, model, params, ...
    failed_earlier: int = 0  # rows whose request failed for good earlier (deterministic error): not run
    when_decided: bool = False  # `when:` reads only the row: projected rows were filtered by it at plan time
    when_source: str | None = None  # where the share of projected rows expected to run comes from
    when_evaluated: int = 0  # rows that share was measured on (this input's, or earlier jobs')
    when_ran: int = 0  # of those, rows the `when:` let run
    attachment_problems: int = 0  # requests whose attachments cannot be sent: they fail without a call
    attachment_examples: list[str] = Field(default_factory=list)  # the first few problems (row and file)


class LengthFit(_Frozen):
    """Answer length regressed on input length over a step's measured answers (plan/length_fit.py):
    where the slope is significant, the expected output follows the rest's mean input."""

    answers: int  # accepted first answers with a counted input (the fit's)
    slope: float  # output tokens per counted input token (least squares)
    input_mean: float  # the fit's mean counted input tokens
    input_ss: float  # sum of squared input deviations (the slope's own error)
    residual_sd: float  # spread of the answers around the line
    r: float  # correlation of output with input
    t: float  # the slope's t statistic
    per_request: float  # the plain expected output per request (re-asks included) at input_mean
    reask_factor: float = 1.0  # attempts answered per request (1 + re-asks): each follows the input
    answer_mean: float = 0.0  # the plain mean of the answers and its spread: its error, scaled
    answer_sd: float = 0.0
    answer_count: int = 0
    rest_input_mean: float | None = None  # counted input per request still to run (set when counted)


class PromptCache(_Frozen):
    """The part of a step's requests that is the same for every row (its shared prefix), whether
    the provider's prompt-cache controls are sent for it, and what the cache is expected to do
    (plan/prompt_cache.py). Not part of the request key: the answer does not depend on the cache."""

    messages: int  # leading messages wholly shared (the system prompt)
    chars: int  # characters shared of the next message (the static head of the prompt template)
    tokens: int  # the shared prefix's tokens (the plan's count)
    minimum: int = 0  # the model's smallest cacheable prefix (providers/caching.py); 0: no prompt cache
    sent: bool = False  # cache controls are sent (or the provider caches by itself)
    note: str = ""  # why not, when not sent
    ttl: str | None = None  # the spec's `cache.ttl` (Anthropic 5m or 1h, OpenAI 24h)
    key: str = ""  # the step's cache key (OpenAI prompt_cache_key; history's key for hit rates)
    writes: bool = False  # a miss writes the prefix, billed as a cache write (Anthropic)
    explicit: bool = False  # Gemini: the system prompt in an explicit context cache, read by every request
    system_tokens: int = 0  # the explicit cache's tokens (the system prompt's; with `auto`, what it would hold)
    explicit_auto: bool = False  # `cache.explicit: auto`: the plan chooses (plan/context_cache.py)
    explicit_default: bool = False  # `cache.explicit` unset: `auto` on Gemini batch steps, none elsewhere
    explicit_note: str = ""  # why `auto` chose an explicit cache or not
    concurrency: int = 32  # `limits.concurrency`: the misses assumed for a realtime run until measured
    # Learned from earlier runs of the same prefix (pilot included): realtime runs miss about the
    # same number of times whatever their size (requests in flight before the first write lands);
    # batches hit a share of their requests. None: not measured yet (assumed, see `source`).
    misses_per_run: float | None = None
    batch_hit_share: float | None = None
    read_per_hit: float | None = None  # tokens a hit reads (OpenAI rounds down to 128-token steps)
    write_per_miss: float | None = None  # tokens a miss writes (the provider's count of the prefix)
    source: str = "assumed"  # assumed | history: N runs


class ReducePlan(_Frozen):
    """A reduce step's grouping and folding, pinned (plan/reduce.py)."""

    group_by: list[str]  # input columns or `step.field` answers whose values make a group
    keep: str = "groups"  # groups | rows (also broadcast each group's answer to its rows)
    fold_prompt: str | None = None  # combines partial answers (None: the step's own prompt)


class ResolvePlan(_Frozen):
    """A resolve step's pairing and naming, pinned (plan/resolve_walk.py). The step's `schema` is
    its rows' answers (`{cluster, canonical}`); its requests judge pairs with the judge's schema."""

    value: str  # input column or `step.field` answer resolved
    block_key: str | None = None  # DuckDB expression: equal values pair up
    block_on: str | None = None  # DuckDB condition over rows a and b
    similar: tuple[str, float, int] | None = None  # (embed step, cosine threshold, top_k)
    max_pairs: int | None = None  # most candidate pairs judged (bounds the plan's count)
    canonical: str = "most_frequent"  # most_frequent | longest | prompt
    canonical_prompt: str | None = None
    canonical_system: str | None = None
    judge_schema: dict[str, Any]
    judge_sent_schema: dict[str, Any] | None = None
    canonical_sent_schema: dict[str, Any] | None = None
    canonical_strict: bool = False


class SplitPlan(_Frozen):
    """A split step's cutting rules, pinned (plan/split.py); `StepPlan.prompt` is the text template."""

    chunk_tokens: int
    overlap_tokens: int = 0
    delimiter: str | None = None
    before: int = 0  # neighbouring chunks gathered before and after each chunk
    after: int = 0
    tokenizer: tuple[str, str]  # (provider, model) whose counter cuts the text: the job model's


class StepPlan(_Frozen):
    """Everything needed to build and price one step's requests, pinned at plan time."""

    name: str
    provider: str
    model: str
    api: str | None = None
    base_url: str | None = None
    endpoint: str | None = None  # normalised endpoint in the request key (None: the official one)
    api_key_env: str | None = None  # the variable's name, never its value
    provider_options: dict[str, Any] = Field(default_factory=dict)  # spec `model.options`
    params: dict[str, Any]
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    sent_schema: dict[str, Any] | None = None
    strict: bool = False
    schema_notes: list[str] = Field(default_factory=list)
    system: str | None = None
    prompt: str
    when: str | None = None
    allow_empty: bool = False  # text steps: an empty answer is accepted, not re-asked (spec `allow_empty`)
    tools: tuple[Tool, ...] = ()  # functions the answer calls (`schema` is then the calls')
    tool_choice: str | None = None  # required | auto | a tool's name (steps with tools only)
    depends_on: list[str] = Field(default_factory=list)
    grain: str | None = None  # rows it has one result per: None = input rows, else that fan-out step's elements
    fan_out: bool = False  # SQL steps: each row becomes zero or more element rows `<row_key>#<n>`
    max_fanout: int | None = None  # fan-out steps: most elements per row (None: unbounded)
    sql_files: dict[str, str] = Field(default_factory=dict)  # SQL steps: files the query reads -> sha256
    mode: str = "realtime"  # realtime | batch (auto is settled when the plan is compiled)
    mode_note: str | None = None  # why this mode, when it was chosen for the user
    service_tier: str | None = None  # flex: OpenAI's flex processing (`mode: flex`), realtime at batch prices
    flex_fallback: bool = False  # a flex request the provider cannot serve may run at the standard tier
    prompt_cache: PromptCache | None = None  # the shared prefix and its cache controls (plan/prompt_cache.py)
    price: dict[str, Any] | None = None
    token_count_exact: bool = False
    token_upper_factor: float = 1.0
    max_tokens: int
    context_window: int | None = None
    expected_output_tokens: int  # per request, re-asked attempts included (see plan/estimate.py)
    expected_output_mean: float | None = None  # the same, unrounded, when measured (history or pilot answers)
    output_source: str = "heuristic"  # where expected_output_tokens comes from: heuristic | history: N answers | ...
    length_key: str = ""  # what decides an answer's length (model, schema or text, templates): history's key
    when_key: str | None = None  # a `when:` on earlier answers: its text and those steps' length keys
    when_history: list[int] = Field(default_factory=list)  # [rows run, rows evaluated] of earlier jobs' runs
    input_factor: float = 1.0  # expected billed input tokens per counted token (calibration, re-asks)
    reask_input_tokens: float = 0.0  # per request: what re-asks add to the planned input (rejected answer, feedback)
    answer_share: float = 1.0  # requests answered in the end (history): later steps read only those
    output_error: float | None = None  # measured mean output: its 90 % error, relative (Student's t)
    output_error_ends: tuple[float, float] | None = None  # the same below and above (skew moves it up)
    length_fit: LengthFit | None = None  # output adjusted for the rest's input length (plan/length_fit.py)
    input_source: str = ""  # exact | calibrated: N answers | estimate | billed ... (see plan/estimate.py)
    input_ratio: float = 1.0  # an exact count the provider bills otherwise: its reported / counted input
    key_prefix: str  # canonical provider/model/params/schema part of the request key
    attachments: list[str] = Field(default_factory=list)  # `attachments:` expressions (plan/attachments.py)
    attachments_folder: str | None = None  # where relative attachment paths start (the input's folder)
    media_rules: str | None = None  # provider whose attachment limits and token rules apply (also under --mock)
    pdf_text: bool = False  # `pdf: text`: PDF attachments are sent as their extracted text (plan/pdf_text.py)
    kind: str = "llm"  # llm | embed (`prompt` is the text to embed, plan/embed_step.py) | reduce | split
    reduce: ReducePlan | None = None  # reduce steps: grouping and folding (plan/reduce.py)
    split: SplitPlan | None = None  # split steps: how the text is cut (plan/split.py)
    resolve: ResolvePlan | None = None  # resolve steps: pairs, clusters, canonical (plan/resolve_walk.py)
    gather: dict[str, tuple[int, int]] = Field(default_factory=dict)  # step -> (before, after) neighbours' answers
    dimensions: int | None = None  # embed: the vector size (None: unknown until the first answer)
    group_size: int | None = None  # embed: most texts per realtime call (None: the provider's limit)
    fallbacks: list["StepPlan"] = Field(default_factory=list)  # models asked in turn for rows this one fails
    fallback_on: list[str] = Field(default_factory=list)  # the failures that move a row on (spec `fallback_on`)
    escalation: "StepPlan | None" = None  # `escalate.to`: the stronger model asked for some rows again
    escalate_when: str | None = None  # `escalate.when`: over the step's own answer, by the step's name
    fallback_share: float | None = None  # share of requests that fell back in earlier runs (None: not measured)
    fallback_share_source: str | None = None  # where that share was measured: `history: N requests`, `pilot: ...`
    escalate_share: float | None = None  # share of answered requests that escalated earlier (None: not measured)
    escalate_share_source: str | None = None  # where that share was measured, as `fallback_share_source`
    counts: StepCounts = Field(default_factory=StepCounts)

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    @property
    def schema(self) -> dict[str, Any] | None:  # type: ignore[override]
        return self.schema_

    @property
    def step_kind(self) -> StepKind:
        """What kind of work the step is (plan/step_kind.py): SQL, split, embed, reduce or LLM."""
        return kind_of(self.provider, self.kind)

    @property
    def local(self) -> bool:
        """Computed in DuckDB (SQL and split steps): no provider, no request, no cost."""
        return self.step_kind.local

    @property
    def other_models(self) -> bool:
        """Whether a row's answer may come from another model than the step's (fallback, escalation)."""
        return bool(self.fallbacks) or self.escalation is not None

    @property
    def json_answers(self) -> bool:
        """Whether stored answers are JSON that later steps read parsed (objects, vectors)."""
        return self.schema_ is not None or self.kind == "embed"


class PlanLimits(LimitsSpec):
    """The spec's limits as the plan pins them, read by attribute. A key an older batchor wrote and
    this one no longer knows is ignored (the file's hash is checked on its raw JSON)."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class InputInfo(_Frozen):
    files: list[str]
    format: str
    fingerprint: str
    columns: list[str]
    rows: int
    sql: str | None = None
    limit: int | None = None
    sample: int | None = None
    seed: int = 0
    key_columns: list[str] = Field(default_factory=list)
    remote: list[str] = Field(default_factory=list)  # url#version of a remote input: checked again at apply


class OutputInfo(_Frozen):
    path: str
    format: str
    spec_path: str | None = None  # a partial run (--limit, --sample, --model, pilot, data): the spec's own
    variant: list[str] = Field(default_factory=list)  # what makes the run partial (plan/variants.py)
    escape_formulas: bool = True  # CSV/TSV: formula-like text cells get a leading ' (outputs/formulas.py)
    stream: bool = False  # JSONL: rows appended as they finish (outputs/stream.py)


class PlanTotals(_Frozen):
    rows: int
    requests: int
    to_run: int
    cached: int
    skipped: int
    input_tokens: int
    output_tokens_expected: int
    output_tokens_upper: int
    cost_expected: float
    cost_upper: float
    changed: int = 0
    unpriced_models: list[str] = Field(default_factory=list)
    estimates: bool = False  # some token counts are estimates (non-OpenAI tokenizers)
    unbounded: list[str] = Field(default_factory=list)  # steps below a fan-out without a bound
    failed_earlier: int = 0  # rows whose request failed for good earlier: not run again


class PlanHeader(_Frozen):
    format_version: int = PLAN_FORMAT_VERSION
    plan_id: str = ""
    created_at: str
    batchor_version: str
    name: str
    spec_source: str
    spec_text: str
    spec: dict[str, Any]
    base_dir: str
    input: InputInfo
    output: OutputInfo
    steps: list[StepPlan]
    limits: PlanLimits
    keep_raw: bool = True
    totals: PlanTotals
    state_location: str | None = None  # absolute path or URL, never with a password (postgres_store.without_password)
    state_source: str | None = None  # how the state was found (state/location.py): --state, the spec, the project
    refresh: list[str] = Field(default_factory=list)  # steps whose cached answers it ignores; "*": --no-cache
    mocked: bool = False
    data_sha256: str = ""
    retry_failed: bool = False  # planned with --retry-failed: apply sends failed requests again too
    seal: str = ""  # HMAC of plan_id with the planning state's key (plan/trust.py): not hashed, never the key

    def step(self, name: str) -> StepPlan:
        return next(s for s in self.steps if s.name == name)

    def waves(self) -> list[list[StepPlan]]:
        """Steps grouped in dependency order: each wave only needs earlier waves."""
        done: set[str] = set()
        waves: list[list[StepPlan]] = []
        remaining = list(self.steps)
        while remaining:
            wave = [s for s in remaining if set(s.depends_on) <= done]
            waves.append(wave)
            done |= {s.name for s in wave}
            remaining = [s for s in remaining if s.name not in done]
        return waves
