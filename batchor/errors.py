"""One error tree for batchor.

Every error a user can meet is a `BatchorError` with a stable `code` (for scripts and CI) and an
`exit_code` (for the CLI). Messages say what went wrong, where, and how to fix it. Provider
failures are split into transient ones (retry) and terminal ones (fail the row at once).
"""

from __future__ import annotations

import functools
import re
from contextlib import contextmanager
from typing import Any, ClassVar, Iterator

# CLI exit codes (documented in docs/reference/errors.md, generated from this module).
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_PENDING = 2
EXIT_ROWS_FAILED = 3
EXIT_COST_LIMIT = 4
EXIT_STALE_PLAN = 5
EXIT_APPROVAL = 6
EXIT_IN_FLIGHT = 7
EXIT_LOCKED = 8
EXIT_CHECKS_FAILED = 9
EXIT_PAUSED = 10
EXIT_COST_INCREASE = 11
EXIT_USAGE = 64
EXIT_INTERRUPTED = 130


class BatchorError(Exception):
    """Root of every error batchor raises on purpose."""

    code: ClassVar[str] = "error"
    exit_code: ClassVar[int] = EXIT_ERROR

    def __init__(self, message: str, *, hint: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = details

    def __str__(self) -> str:
        return f"{self.message}\n  fix: {self.hint}" if self.hint else self.message

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.hint:
            data["hint"] = self.hint
        return data


class UsageError(BatchorError):
    """A command-line or API argument has a value it cannot take (names the argument)."""

    code = "usage"
    exit_code = EXIT_USAGE


class ReviewFileError(UsageError):
    """A review file (`batchor review import`) whose rows or columns do not match the job it names,
    or a corrected value its field cannot take: nothing of the file is stored."""

    code = "review_file_mismatch"


class ReviewFilterError(UsageError):
    """`review export --where` is not one SQL expression over the answers table, or fails there."""

    code = "review_filter_invalid"


# --- spec and input -------------------------------------------------------------------------


class SpecError(BatchorError):
    """The spec file is malformed or invalid (file:line and key path in the message)."""

    code = "spec_invalid"


class SpecProblemsError(SpecError):
    """Several independent problems found in one pass over a spec, each with its own code."""

    code = "spec_problems"

    def __init__(self, problems: list[BatchorError]) -> None:
        lines = [f"  [{p.code}] {p.message}" + (f"\n    fix: {p.hint}" if p.hint else "") for p in problems]
        super().__init__(f"{len(problems)} problems:\n" + "\n".join(lines))
        self.problems = problems

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "problems": [p.to_dict() for p in self.problems]}


def problems_of(exc: BatchorError) -> list[BatchorError]:
    """The single problems an error stands for (a SpecProblemsError holds several)."""
    return list(exc.problems) if isinstance(exc, SpecProblemsError) else [exc]


def raise_problems(problems: list[BatchorError]) -> None:
    """Raise nothing, the one problem, or all of them together."""
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise SpecProblemsError(problems)


class Problems:
    """Collects the errors of independent checks, so one pass reports every problem it can."""

    def __init__(self) -> None:
        self.found: list[BatchorError] = []

    @contextmanager
    def check(self) -> Iterator[None]:
        """Run one check; its error is recorded and the caller goes on with the next check."""
        try:
            yield
        except BatchorError as exc:  # the same problem met by two checks is reported once
            seen = {(p.code, p.message) for p in self.found}
            self.found.extend(p for p in problems_of(exc) if (p.code, p.message) not in seen)

    def raise_all(self) -> None:
        raise_problems(self.found)


class SpecYamlError(SpecError):
    code = "spec_yaml"


class EnvVarMissingError(SpecError):
    code = "env_missing"


class TemplateError(SpecError):
    """A Jinja template does not parse."""

    code = "template_syntax"


class TemplateUndefinedError(SpecError):
    """A template references a column or step field that does not exist."""

    code = "template_undefined"


class SchemaError(SpecError):
    """An output JSON schema is invalid or unusable."""

    code = "schema_invalid"


class ProviderSchemaError(SchemaError):
    """A schema the chosen provider cannot accept."""

    code = "schema_unsupported"


class ToolSpecError(SpecError):
    """A step's `tools:` cannot be sent: a name no provider accepts, two tools of one name, a
    `tool_choice` naming no declared tool, or tools beside an output schema."""

    code = "tool_invalid"


class ToolSchemaMissingError(SchemaError):
    """A tool's `parameters` names a schema file that is not there or is not a JSON object."""

    code = "tool_schema_missing"


class InputError(BatchorError):
    code = "input_invalid"


class InputMissingError(InputError):
    code = "input_missing"


class InputUnreachableError(InputError):
    """A remote input (https://, s3://) could not be reached: the message names the URL and why."""

    code = "input_unreachable"


class InputEmptyError(InputError):
    code = "input_empty"


class InputEncodingError(InputError):
    code = "input_encoding"


class DuplicateKeyError(InputError):
    code = "duplicate_key"


class UnknownProviderError(SpecError):
    code = "unknown_provider"


class UnknownModelError(SpecError):
    """The spec names a model that is neither priced nor known to the provider (before any call).

    Distinct from `ModelNotFoundError` (`unknown_model`), the provider's own answer at run time."""

    code = "model_unlisted"


class CloudPathMissingError(SpecError):
    """A cloud path batchor does not have yet (a provider, or a Batch API on a cloud): refused at
    `validate`, naming what is missing and what works instead, never a crash at `apply`."""

    code = "cloud_unsupported"


class ModelOptionError(SpecError):
    """`model.options` holds a key the provider does not read, or a value of the wrong kind."""

    code = "model_option"


class ModelParamError(SpecError):
    """`model.params` names a parameter the provider does not take (every request would be refused)."""

    code = "model_param"


class FlexUnsupportedError(SpecError):
    """`mode: flex` on a model or provider without OpenAI's flex processing tier."""

    code = "flex_unsupported"


class CacheTtlError(SpecError):
    """`cache.ttl` names a prompt-cache lifetime the step's provider does not offer."""

    code = "cache_ttl"


class CacheRetentionUnsupportedError(SpecError):
    """`cache: {ttl: 24h}` on an OpenAI model without extended prompt-cache retention."""

    code = "cache_retention_unsupported"


class ExplicitCacheUnsupportedError(SpecError):
    """`cache: {explicit: true}` where batchor cannot use an explicit context cache: a provider
    other than Gemini (the others cache the shared prefix without one)."""

    code = "explicit_cache_unsupported"


class BaseUrlMissingError(SpecError):
    """An endpoint with no default URL (`openai-compatible`) and no `base_url` in the spec."""

    code = "base_url_missing"


# --- trust: what a spec, a plan or a drafted spec may do (docs/explanation/trust-model.md) ---


class SqlNotAllowedError(SpecError):
    """A SQL field of the spec is not exactly one query (a second statement, COPY, ATTACH, SET, ...)."""

    code = "sql_not_allowed"


class PathOutsideProjectError(SpecError):
    """Spec SQL or a template tried to read a file outside the project folder (or a symlink out of it)."""

    code = "path_outside_project"


class TemplateIncludeError(TemplateError):
    """A template `{% include %}`/`{% import %}` names a file outside the spec's `templates:` folder."""

    code = "template_include"


class KeyEnvNotAllowedError(SpecError):
    """`api_key_env` names a variable that is not the provider's own, and the spec does not allow it."""

    code = "api_key_env_not_allowed"


class UrlCredentialsError(SpecError):
    """A `base_url` carries a user name, password or `${VAR}`: credentials go in the key variable."""

    code = "url_credentials"


# --- plan and budget ------------------------------------------------------------------------


class NoPriceError(BatchorError):
    code = "no_price"
    exit_code = EXIT_COST_LIMIT


class CostLimitError(BatchorError):
    """The plan's upper bound (or the running spend) would pass --max-cost."""

    code = "cost_limit"
    exit_code = EXIT_COST_LIMIT

    def __init__(self, message: str, *, plan: Any = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.plan = plan


class CostUnboundedError(CostLimitError):
    """A step runs once per element of a fan-out with no bound: the plan has no upper bound."""

    code = "cost_unbounded"


class VocabularyGoneError(BatchorError):
    """Token counts were remembered with a tokenizer vocabulary that can no longer be loaded."""

    code = "vocabulary_gone"


class PlanFileError(BatchorError):
    """A plan file is truncated, tampered with or from a newer batchor."""

    code = "plan_invalid"
    exit_code = EXIT_STALE_PLAN


class UntrustedPlanError(PlanFileError):
    """A saved plan this state did not make, or whose powers differ from what the spec would give."""

    code = "plan_untrusted"
    exit_code = EXIT_APPROVAL


class PlanTooLargeError(PlanFileError):
    code = "plan_too_large"


class StalePlanError(BatchorError):
    """A saved plan no longer matches its input or state."""

    code = "stale_plan"
    exit_code = EXIT_STALE_PLAN


class ApprovalRequiredError(BatchorError):
    code = "approval_required"
    exit_code = EXIT_APPROVAL


# --- state ----------------------------------------------------------------------------------


class StateError(BatchorError):
    code = "state_error"


class StateLockedError(StateError):
    code = "state_locked"
    exit_code = EXIT_LOCKED


class NoStateError(StateError):
    """A command that only reads the state found none: it creates nothing (`apply` makes one)."""

    code = "no_state"


class ForeignStateError(StateError):
    """The state file is a DuckDB database batchor did not create (other tables, no batchor metadata)."""

    code = "state_foreign"


class StateVersionError(StateError):
    code = "state_version"


class StateCorruptError(StateError):
    code = "state_corrupt"


class DiskFullError(StateError):
    """A write failed for lack of space (or a file size limit): what was stored stays intact.

    `stored`: the write itself was committed, and only the upkeep after it failed (DuckDB's
    checkpoint as the file is detached); its rows are stored and must not be written again."""

    code = "disk_full"
    stored = False


class StateWriteError(StateError):
    """A write to the state failed for another reason than space (a read-only file or database, an
    I/O error): sending stopped; what was stored stays intact."""

    code = "state_write_failed"


_NO_SPACE_ERRNOS = (28, 27, 122)  # ENOSPC, EFBIG, EDQUOT
_NO_SPACE_SQLSTATE = "53100"  # PostgreSQL's disk_full: "could not extend file ...: wrote only 4096 of 8192 bytes"
_NO_SPACE_TEXT = ("No space left on device", "File too large", "Disk quota exceeded")


def as_disk_full(exc: BaseException, where: str) -> DiskFullError | None:
    """`exc` as a DiskFullError when it is one (an OSError, or DuckDB's wrapping of one), else None.

    DuckDB reports a failed WAL or checkpoint write as a plain `duckdb.Error` carrying the OS
    message, so the text is checked too; PostgreSQL's says so by its SQLSTATE.
    """
    if isinstance(exc, BatchorError):
        return exc if isinstance(exc, DiskFullError) else None
    errno = getattr(exc, "errno", None)
    pg_full = getattr(exc, "sqlstate", None) == _NO_SPACE_SQLSTATE
    if errno not in _NO_SPACE_ERRNOS and not pg_full and not any(t in str(exc) for t in _NO_SPACE_TEXT):
        return None
    lines = str(exc).splitlines() or [""]
    told = next((line for line in lines if any(t in line for t in _NO_SPACE_TEXT)), lines[0])
    told = told.rpartition("Original error: ")[2]  # DuckDB's failed checkpoint: what was committed stays
    return DiskFullError(
        f"no space left while writing {where}: {told.strip()[:300]}",
        hint="free disk space (or raise the quota) and run the same command again: every answer "
        "stored before the failure is kept and will not be paid for again",
    )


@contextmanager
def disk_full_reported(where: str) -> Iterator[None]:
    """Re-raise a failed write for lack of space as DiskFullError (code `disk_full`)."""
    try:
        yield
    except Exception as exc:
        error = as_disk_full(exc, where)
        if error is None or error is exc:
            raise
        raise error from exc


class BatchesInFlightError(BatchorError):
    """Rows a realtime step would send sit in provider batches that are still running."""

    code = "batches_in_flight"
    exit_code = EXIT_IN_FLIGHT


class OutputError(BatchorError):
    """The output file cannot be written (path is a directory, disk full, no permission)."""

    code = "output_unwritable"


class ResolveError(SpecError):
    """A `resolve:` job that cannot run: no judge step with a boolean `same`, an unknown column,
    a blocking rule that fails or pairs no rows."""

    code = "resolve_invalid"


class OutputStreamError(SpecError):
    """`output.stream: true` on an output that cannot stream (not JSONL, or a fan-out job)."""

    code = "output_stream_unsupported"


class OutputConflictError(OutputError):
    """The output path is the state file, an input file or the spec: writing it would destroy them."""

    code = "output_conflict"


class RunNotFoundError(BatchorError):
    code = "run_not_found"


class OutputExistsError(BatchorError):
    """A command would overwrite a file the user has (`draft -o`, without --force)."""

    code = "file_exists"


class DraftInvalidError(BatchorError):
    """`batchor draft`: the model gave no spec that validates and rehearses, in every attempt allowed."""

    code = "draft_invalid"


# --- providers (raised by adapters, classified by the engine) ------------------------------


class NoApiKeyError(BatchorError):
    code = "no_api_key"


class ProviderError(BatchorError):
    """A provider call failed. `transient` decides whether the engine retries."""

    code = "provider_error"
    transient: ClassVar[bool] = False
    consumes_attempt: ClassVar[bool] = True
    # The same request fails the same way again: a later apply leaves the row failed (unless
    # `--retry-failed` or `--refresh STEP`) instead of paying for the same error once more.
    deterministic: ClassVar[bool] = False
    completion: Any = None  # the billed answer behind the error (refused, invalid, truncated), if any
    timed_out: bool = False  # no answer came within the request timeout (the endpoint may be silent)

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.status = status
        self.retry_after = retry_after


class RateLimitedError(ProviderError):
    """429 / rate limit: wait and retry; does not use up an attempt. `rate_limits` holds the
    429's rate-limit headers (named as `Completion.rate_limits`): they tell a spent account
    limit (the pool slows down) from a random 429 (only this request waits)."""

    code = "rate_limited"
    transient = True
    consumes_attempt = False

    def __init__(self, message: str, *, rate_limits: dict[str, float] | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.rate_limits: dict[str, float] = dict(rate_limits or {})


class QuotaExhaustedError(ProviderError):
    """Billing or quota exhausted: retrying does not help; the run pauses."""

    code = "quota_exhausted"


class TransientProviderError(ProviderError):
    """5xx, timeouts, connection errors: retry with backoff."""

    code = "provider_unavailable"
    transient = True


class ProviderUnreachableError(TransientProviderError):
    """No connection could be made (refused, host name not found, unreachable, TLS failure):
    nothing was sent. Retried like any transient error, but a few in a row with no answer in
    between stop the run (engine/reachability.py): every other request would fail the same way."""

    code = "provider_unreachable"


class EndpointUnresponsiveError(TransientProviderError):
    """The endpoint takes connections but answers nothing: many requests in a row timed out with
    no answer in between (engine/reachability.py). The run stops; its rows stay pending."""

    code = "endpoint_unresponsive"


class EndpointNotFoundError(ProviderError):
    """Every request got the same 404 (a wrong base URL or path): the run stops; rows stay pending."""

    code = "endpoint_not_found"


class BatchUnsupportedError(ProviderError):
    """The endpoint has no Batch API (its upload or create answered 404/405): nothing was sent in
    batch, the rows stay pending. Run them in realtime instead."""

    code = "batch_unsupported"


class InvalidRequestError(ProviderError):
    """4xx invalid request: fail the row at once with the provider's message."""

    code = "invalid_request"
    deterministic = True


class AttachmentError(InvalidRequestError):
    """An attachment cannot be sent (found at plan time, or changed since): the row fails before
    any call, the run goes on. The subclasses name what is wrong."""

    code = "attachment_invalid"


class AttachmentMissingError(AttachmentError):
    code = "attachment_missing"


class AttachmentUnsupportedError(AttachmentError):
    """Not an image or PDF the provider takes, or a URL it does not fetch (batchor never downloads)."""

    code = "attachment_unsupported"


class AttachmentTooLargeError(AttachmentError):
    code = "attachment_too_large"


class AttachmentChangedError(AttachmentError):
    """The file's content differs from what was planned (and keyed): plan again to send it."""

    code = "attachment_changed"
    deterministic = False


class ContentRefusedError(ProviderError):
    code = "content_refused"
    deterministic = True


class ContextLengthError(InvalidRequestError):
    code = "context_length"


class ModelNotFoundError(ProviderError):
    """The provider does not know the model: every request would fail, so the run stops."""

    code = "unknown_model"


class AuthenticationError(ProviderError):
    code = "auth_failed"


class InvalidOutputError(ProviderError):
    """The model's answer does not match the step's schema (re-asked a bounded number of times)."""

    code = "invalid_output"
    transient = True
    rejected: str | None = None  # the answer's text, sent back in the re-ask (schema/feedback.py)
    violations: tuple[str, ...] = ()  # the validator's messages, one per broken rule


class UnexpectedToolCallError(ProviderError):
    """The model answered with a tool call (a function to run) where the step wants an answer:
    batchor runs no tools, so the row fails; the call was billed and is recorded with its cost."""

    code = "unexpected_tool_call"
    deterministic = True


class ChecksFailedError(BatchorError):
    """Quality gates (`checks:`) failed on the stored answers; the answers themselves are kept."""

    code = "checks_failed"
    exit_code = EXIT_CHECKS_FAILED


class CostIncreaseError(BatchorError):
    """`plan --compare-to BASE --fail-on-increase PCT`: the full job costs more than PCT % above
    what it cost at BASE (the plan and the cost diff are printed first)."""

    code = "cost_increase"
    exit_code = EXIT_COST_INCREASE


class CompareBaseError(UsageError):
    """`plan --compare-to BASE`: BASE is neither a saved plan file nor a git revision of the spec."""

    code = "compare_base_invalid"


class TruncatedOutputError(ProviderError):
    """The answer was cut off by max_tokens: asking the same again gives the same cut (at
    temperature 0), so the row fails unless `limits.on_truncation: reask` asks with a larger limit."""

    code = "truncated"


class RunFailedError(BatchorError):
    """A run ended with rows failed or still without an answer (`partial` / `failed`)."""

    code = "run_failed"
    exit_code = EXIT_ROWS_FAILED


class PilotUnansweredError(BatchorError):
    """`apply --pilot`: a step's pilot answers were all rejected, re-asks included, so the rest
    would most likely pay for the same rejections on every row: it is not started."""

    code = "pilot_unanswered"
    exit_code = EXIT_ROWS_FAILED


class InterruptedRunError(BatchorError):
    """Ctrl+C or SIGTERM stopped the run; what finished is kept."""

    code = "interrupted"
    exit_code = EXIT_INTERRUPTED


class RunPausedError(BatchorError):
    """The provider's quota or billing is exhausted: the run paused with the reason in `status`."""

    code = "paused"
    exit_code = EXIT_PAUSED


# How a run ended -> the error it amounts to (its exit code); docs/reference/errors.md lists each.
RUN_STATUS_ERRORS: dict[str, type[BatchorError]] = {
    "partial": RunFailedError,
    "failed": RunFailedError,
    "budget": CostLimitError,
    "paused": RunPausedError,
    "interrupted": InterruptedRunError,
    "in_flight": BatchesInFlightError,
}


def exit_code_for_status(status: str) -> int:
    """The CLI exit code of a run that ended with `status` (0 for `succeeded`)."""
    if status == "succeeded":
        return EXIT_OK
    error = RUN_STATUS_ERRORS.get(status)
    return error.exit_code if error is not None else EXIT_ERROR


_KEYLIKE = re.compile(r"[A-Za-z0-9_\-]{8,}")
_KEY_PART = 8  # a run of this many of a key's characters in a row is taken for (part of) the key


def redact(text: str, secrets: list[str]) -> str:
    """Remove secret values (API keys) from text before it reaches logs, state or errors: the
    whole key, and any word sharing a run of 8 characters with it, since providers echo part of
    a rejected key ("Incorrect API key provided: sk-abc123************wxyz")."""
    for secret in secrets:
        if secret and len(secret) >= 6:
            text = text.replace(secret, "[REDACTED]")
            text = _KEYLIKE.sub(functools.partial(_unless_part_of, secret), text)
    return text


def _unless_part_of(secret: str, word: re.Match[str]) -> str:
    found = word.group()
    if any(found[i : i + _KEY_PART] in secret for i in range(len(found) - _KEY_PART + 1)):
        return "[REDACTED]"
    return found


class BatchCreateUnknownError(TransientProviderError):
    """A batch create call timed out or lost its connection: the batch may exist remotely.

    Never retried blindly: the engine looks the batch up by its tag first."""

    code = "batch_create_unknown"


class BatchResultsGoneError(ProviderError):
    """A finished batch's results can no longer be downloaded (404/410: expired or deleted).

    Its rows fail with this reason instead of being sent again: the provider may have billed them."""

    code = "batch_results_gone"
    deterministic = True  # a later apply leaves it failed too: sending it again may pay twice


class BatchResultUnreadableError(ProviderError):
    """A finished batch's results line is not JSON: its row ran and may have been billed.

    It fails with this reason instead of being sent again by itself (`--retry-failed` sends it)."""

    code = "batch_result_unreadable"
    deterministic = True  # a later apply leaves it failed too: sending it again may pay twice
