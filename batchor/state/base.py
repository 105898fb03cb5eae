"""The state interface: what the planner and engine need from durable storage.

Named transitions (`start_run`, `record_results`, `finish_run`, ...) are each one transaction.
The result cache is keyed by request key, so any spec or run using the same state reuses answers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import pyarrow as pa

from batchor.state.reads import LedgerReads

if TYPE_CHECKING:
    from batchor.state.links import StoredResult

RESULT_SCHEMA = pa.schema(
    [
        ("request_key", pa.string()),
        ("step", pa.string()),
        ("status", pa.string()),  # succeeded | failed
        ("output", pa.string()),  # answer text (JSON text for structured steps)
        ("error_code", pa.string()),
        ("error", pa.string()),
        ("attempts", pa.int16()),
        ("input_tokens", pa.int32()),
        ("output_tokens", pa.int32()),
        ("cost_usd", pa.float64()),
        ("run_id", pa.string()),
    ]
)

ATTEMPT_SCHEMA = pa.schema(
    [
        ("request_key", pa.string()),
        ("run_id", pa.string()),
        ("attempt", pa.int16()),
        ("outcome", pa.string()),  # ok | error code
        ("status_code", pa.int16()),
        ("error", pa.string()),
        ("duration_ms", pa.int32()),
        ("raw", pa.binary()),  # zlib-compressed raw response, when kept
        # What the provider billed for this attempt (0 for calls that got no answer). `estimated`:
        # the response carried no usage, so tokens and cost come from the plan's counts.
        ("input_tokens", pa.int32()),
        ("output_tokens", pa.int32()),
        ("cost_usd", pa.float64()),
        ("estimated", pa.bool_()),
        # The step it answers, and the plan's (o200k or exact) count of the request's input tokens:
        # the provider's reported count over this one calibrates the next plans (state/answer_stats.py).
        ("step", pa.string()),
        ("counted_input_tokens", pa.int32()),
        # A rejected answer and what broke which rule (JSON), so a re-ask survives a crash (engine/resume.py).
        ("feedback", pa.string()),
        # Prompt caching (engine/recorder.py): input tokens read from and written to the provider's
        # cache (parts of input_tokens), and what the attempt would have cost without the cache.
        ("cache_read_tokens", pa.int32()),
        ("cache_write_tokens", pa.int32()),
        ("uncached_usd", pa.float64()),
    ]
)

# Which model answered (fallback models, see engine/fallback.py): `provider:name` of each result and
# attempt, and on a request its model failed, the key of the fallback request that answered it.
# Kept apart from the two schemas above so tables written without them (older callers) still load.
RESULT_MODEL_FIELDS = [("model", pa.string()), ("answered_by", pa.string())]
ATTEMPT_MODEL_FIELDS = [("model", pa.string())]
RESULT_SCHEMA_FULL = pa.schema(list(RESULT_SCHEMA) + [pa.field(n, t) for n, t in RESULT_MODEL_FIELDS])
ATTEMPT_SCHEMA_FULL = pa.schema(list(ATTEMPT_SCHEMA) + [pa.field(n, t) for n, t in ATTEMPT_MODEL_FIELDS])


def follow_fallbacks_sql(steps: int, mark: str) -> str:
    """`StateStore.follow_fallbacks` in both backends' SQL (`mark` parameters: job id, each step)."""
    return (
        "UPDATE job_requests SET request_key = r.answered_by FROM results r "
        f"WHERE job_requests.job_id = {mark} AND job_requests.step IN ({', '.join([mark] * steps)}) "
        "AND r.request_key = job_requests.request_key AND r.answered_by IS NOT NULL"
    )


# How a finished run's reason starts when its rows were judged but its output file was not written.
OUTPUT_NOT_WRITTEN = "output not written"

# A run's status: `running` while it works, then what its rows and its stop reason make it.
RunStatus = Literal["running", "succeeded", "partial", "failed", "interrupted", "budget", "paused", "in_flight", "died"]


@dataclass
class RunRecord:
    run_id: str
    job_id: str
    plan_id: str
    name: str
    status: RunStatus = "running"
    mocked: bool = False
    requests: int = 0
    succeeded: int = 0
    failed: int = 0
    cached: int = 0
    skipped: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    paused_reason: str | None = None
    output_path: str | None = None
    plan_path: str | None = None
    # What the run ended with (None until it ends by reaching its end, being stopped, paused or
    # out of budget; also for runs recorded before batchor kept them): its output's rows by
    # `_status`, and its failed rows by reason with what their attempts cost.
    rows_succeeded: int | None = None
    rows_failed: int | None = None
    rows_pending: int | None = None
    rows_skipped: int | None = None
    failures: dict[str, dict[str, Any]] | None = None
    started_at: Any = None
    finished_at: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rows(self) -> dict[str, int] | None:
        """The output's rows by status when the run ended (None: not known, see above)."""
        counts = [getattr(self, name) for name in END_ROW_COLUMNS]
        if any(n is None for n in counts):
            return None
        return {name.removeprefix("rows_"): int(n) for name, n in zip(END_ROW_COLUMNS, counts)}

    def end_with(self, rows: dict[str, int], failures: dict[str, dict[str, Any]]) -> None:
        """Keep what the run ended with (see the fields above)."""
        for name in END_ROW_COLUMNS:
            setattr(self, name, int(rows[name.removeprefix("rows_")]))
        self.failures = failures


# The runs table's columns, as RunRecord's fields (`failures` is stored as JSON text).
END_ROW_COLUMNS = ("rows_succeeded", "rows_failed", "rows_pending", "rows_skipped")
RUN_COLUMNS = (
    "run_id",
    "job_id",
    "plan_id",
    "name",
    "status",
    "mocked",
    "requests",
    "succeeded",
    "failed",
    "cached",
    "skipped",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "paused_reason",
    "output_path",
    "plan_path",
    *END_ROW_COLUMNS,
    "failures",
    "started_at",
    "finished_at",
)


def run_values(run: RunRecord, names: Sequence[str]) -> list[Any]:
    """`run`'s values for the columns `names`, as stored."""
    return [
        json.dumps(run.failures) if name == "failures" and run.failures is not None else getattr(run, name)
        for name in names
    ]


def run_from_row(row: Sequence[Any]) -> RunRecord:
    """A RunRecord from a row of RUN_COLUMNS."""
    values = dict(zip(RUN_COLUMNS, row))
    if values["failures"] is not None:
        values["failures"] = json.loads(values["failures"])
    return RunRecord(**values)


class StoredResults(Protocol):
    """What writing a job's rows out reads: each step's stored result per row."""

    def job_results(self, job_id: str, step: str) -> pa.Table: ...

    def job_results_for_rows(self, job_id: str, step: str, row_keys: pa.Array) -> pa.Table: ...

    def job_results_for_steps(
        self, job_id: str, steps: Sequence[str], row_keys: pa.Array | None = None
    ) -> pa.Table: ...


class StateStore(LedgerReads, Protocol):
    """What the planner, engine and operator commands use; DuckDBStore and PostgresStore both
    provide it (tests/state/test_state_contract.py runs the same checks on each). The batch
    ledger (`state/batches.py`) works over `connection()`; shared-run coordination
    (`state/leases.py`) is PostgreSQL's alone: its store says so with `shared = True`. Both
    subclass it, inheriting the named reads of `state/reads.py`."""

    location: str

    def connection(self) -> Any:
        """A context manager yielding a connection for one unit of work (`?` placeholders)."""
        ...

    def session(self) -> Any:
        """A context manager that keeps one connection for a series of calls."""
        ...

    def kept_attached(self, seconds: float) -> Any:
        """A context manager within which a series of units spread over time (an apply's flushes)
        may share one connection for up to `seconds` at a time, each unit still committing."""
        ...

    def cached_keys(self, keys: pa.Array) -> set[str]:
        """Which of these request keys already have a succeeded answer."""
        ...

    def cached_key_array(self, keys: pa.Array) -> pa.Array:
        """`cached_keys` as an Arrow array, each key once."""
        ...

    def failed_key_array(self, keys: pa.Array, codes: Sequence[str]) -> pa.Array:
        """Which of these keys (each once) are stored as failed with one of these error codes."""
        ...

    def record_results(self, results: pa.Table, attempts: pa.Table | None = None) -> None:
        """Store answers (RESULT_SCHEMA) and their attempts (ATTEMPT_SCHEMA) in one transaction."""
        ...

    def add_run_requests(self, job_id: str, step: str, table: pa.Table) -> None:
        """Record which request (`request_key`) answers each row (`row_key`) of a job's step."""
        ...

    def forget_run_requests(self, job_id: str, step: str) -> None:
        """Drop a job step's row map (it is about to be recorded again in full)."""
        ...

    def has_job_requests(self, job_id: str, step: str) -> bool: ...

    def steps_with_requests(self, job_id: str, steps: Sequence[str]) -> set[str]:
        """Which of these steps of a job have their row map recorded (a wave's scan: one query)."""
        ...

    def record_step_requests(self, job_id: str, table: pa.Table, forget: Sequence[str] = ()) -> None:
        """Drop the row maps of the steps `forget`, then record `table` (step, row_key,
        request_key) for many steps, in one transaction (see state/step_maps.py)."""
        ...

    def follow_fallbacks(self, job_id: str, steps: Sequence[str]) -> None:
        """Point the rows of the job's `steps` whose request fell back at the fallback request that
        answered it (`answered_by`), so outputs, later steps and status read the answer that was
        accepted; one statement for all the steps (a wave's)."""
        ...

    def job_results(self, job_id: str, step: str) -> pa.Table:
        """Per row of a job's step: row_key, request_key, status, output, error_code, error."""
        ...

    def job_results_for_rows(self, job_id: str, step: str, row_keys: pa.Array) -> pa.Table:
        """`job_results` for these rows only (each once; rows without a mapping are left out):
        the export reads a big job's results part by part."""
        ...

    def job_results_for_steps(self, job_id: str, steps: Sequence[str], row_keys: pa.Array | None = None) -> pa.Table:
        """`job_results_for_rows` of many steps in one query (`row_keys` None: every row), with a
        `step` column first (split it with `state.step_maps.per_step`)."""
        ...

    def results_for_keys(self, keys: pa.Array) -> pa.Table: ...

    def start_run(self, run: RunRecord) -> None: ...

    def finish_run(self, run: RunRecord, *, final: bool = True) -> None: ...

    def get_run(self, run_id: str | None) -> RunRecord | None: ...

    def list_runs(self, limit: int = 50) -> list[RunRecord]: ...

    def failures_by_reason(self, job_id: str) -> dict[str, int]: ...

    # Portable SQL both backends share (as LedgerReads): written once, in the modules named.

    def save_reviews(self, job_name: str, labels: Sequence[Any], source: Any) -> int:
        """Store reviewed labels (state/reviews.py) in one transaction: all or none."""
        from batchor.state.reviews import save_reviews

        return save_reviews(self, job_name, labels, source)

    def reviewed_labels(self, job_name: str) -> list[dict[str, Any]]:
        """A job's reviewed labels: step, row_key, field, value (JSON) and who, when, from which file."""
        from batchor.state.reviews import reviewed_labels

        return reviewed_labels(self, job_name)

    def stored_results(self, keys: Sequence[str]) -> dict[str, StoredResult]:
        """Status, error code, model and link of each of these keys that has a result (state/links.py)."""
        from batchor.state.links import stored_results

        return stored_results(self, keys)

    def link_answers(self, links: Sequence[tuple[str, str]]) -> None:
        """Mark each (request, answer) pair: another model's request `answer` answered `request`
        (state/links.py); `follow_fallbacks` then points the rows at it."""
        from batchor.state.links import link_answers

        link_answers(self, links)

    def record_cache_fee(self, entry: Any) -> float:
        """Store a cache's fees (state/cache_fees.py), replacing its earlier entry (returns its USD)."""
        from batchor.state.cache_fees import record_cache_fee

        return record_cache_fee(self, entry)

    def cached_answers(self, job_id: str, run_id: str) -> dict[str, tuple[int, float]]:
        """Per step of a job: rows answered before `run_id` (the cache) and what they cost then."""
        from batchor.state.spend import cached_answers

        return cached_answers(self, job_id, run_id)

    def list_batches(self, job_id: str) -> list[dict[str, Any]]: ...

    def execute(self, sql: str, args: list[Any] | None = None) -> list[tuple[Any, ...]]:
        """Read queries in the portable subset (`?` placeholders), fully fetched."""
        ...

    def close(self) -> None: ...
