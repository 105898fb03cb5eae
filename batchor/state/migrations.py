"""Ordered schema migrations for the state database (applied once each, in order).

Append new migrations; never edit a released one. The version is stored in `batchor_meta`.
"""

from __future__ import annotations

from batchor.state.base import END_ROW_COLUMNS
from batchor.state.cache_fees import CACHE_FEES_TABLE
from batchor.state.reviews import REVIEWS_TABLE

SCHEMA_VERSION = 12

MIGRATIONS: list[tuple[int, list[str]]] = [
    (
        1,
        [
            """CREATE TABLE IF NOT EXISTS runs (
            run_id VARCHAR PRIMARY KEY, job_id VARCHAR, plan_id VARCHAR, name VARCHAR,
            status VARCHAR, mocked BOOLEAN, requests BIGINT, succeeded BIGINT, failed BIGINT,
            cached BIGINT, skipped BIGINT, input_tokens BIGINT, output_tokens BIGINT,
            cost_usd DOUBLE, paused_reason VARCHAR, output_path VARCHAR, plan_path VARCHAR,
            started_at TIMESTAMP, finished_at TIMESTAMP)""",
            """CREATE TABLE IF NOT EXISTS results (
            request_key VARCHAR PRIMARY KEY, step VARCHAR, status VARCHAR, output VARCHAR,
            error_code VARCHAR, error VARCHAR, attempts SMALLINT, input_tokens INTEGER,
            output_tokens INTEGER, cost_usd DOUBLE, run_id VARCHAR, finished_at TIMESTAMP)""",
            """CREATE TABLE IF NOT EXISTS job_requests (
            job_id VARCHAR, step VARCHAR, row_key VARCHAR, request_key VARCHAR,
            PRIMARY KEY (job_id, step, row_key))""",
            """CREATE TABLE IF NOT EXISTS attempts (
            request_key VARCHAR, run_id VARCHAR, attempt SMALLINT, outcome VARCHAR,
            status_code SMALLINT, error VARCHAR, duration_ms INTEGER, raw BLOB, created_at TIMESTAMP)""",
        ],
    ),
    # Provider batches (see state/batches.py): one row per remote batch, written as an intent
    # before the create call, and the request keys each one carries.
    (
        2,
        [
            """CREATE TABLE IF NOT EXISTS batches (
            batch_id VARCHAR PRIMARY KEY, job_id VARCHAR, run_id VARCHAR, step VARCHAR, step_fp VARCHAR,
            provider VARCHAR, model VARCHAR, connection VARCHAR, chunk INTEGER, state VARCHAR,
            remote_id VARCHAR, remote_status VARCHAR, requests INTEGER, input_tokens BIGINT, bytes BIGINT,
            succeeded INTEGER, failed INTEGER, requeued INTEGER, error VARCHAR, created_s DOUBLE, created_at TIMESTAMP,
            submitted_at TIMESTAMP, updated_at TIMESTAMP, ended_at TIMESTAMP)""",
            """CREATE TABLE IF NOT EXISTS batch_requests (
            batch_id VARCHAR, request_key VARCHAR, outcome VARCHAR)""",
        ],
    ),
    # No primary keys on the two tables that grow with every row: their indexes cost more than the
    # rows to insert and checkpoint (at 1M rows, 10x for a 400-row flush) and ~100 bytes a row, and
    # no query uses them (lookups are hash joins). The store's writes keep the keys unique instead.
    # DuckDB cannot drop a constraint: the tables are copied without it.
    (
        3,
        [
            "CREATE TABLE results_v3 AS SELECT * FROM results",
            "DROP TABLE results",
            "ALTER TABLE results_v3 RENAME TO results",
            "CREATE TABLE job_requests_v3 AS SELECT * FROM job_requests",
            "DROP TABLE job_requests",
            "ALTER TABLE job_requests_v3 RENAME TO job_requests",
        ],
    ),
    # The ledger of attempts: every billed response carries its tokens and cost, so spend is the
    # sum of attempts (rejected ones included). Rows written before have NULL here (not known).
    (
        4,
        [
            "ALTER TABLE attempts ADD COLUMN input_tokens INTEGER",
            "ALTER TABLE attempts ADD COLUMN output_tokens INTEGER",
            "ALTER TABLE attempts ADD COLUMN cost_usd DOUBLE",
            "ALTER TABLE attempts ADD COLUMN estimated BOOLEAN",
        ],
    ),
    # Estimates that learn (state/answer_stats.py): each run keeps its plan's per-step estimate and
    # what determines the answers' length; each attempt names its step and the plan's input count.
    (
        5,
        [
            """CREATE TABLE IF NOT EXISTS run_steps (
            run_id VARCHAR, step VARCHAR, kind VARCHAR, length_key VARCHAR, model VARCHAR,
            requests BIGINT, input_tokens BIGINT, output_tokens BIGINT, expected_usd DOUBLE, upper_usd DOUBLE,
            output_source VARCHAR, input_source VARCHAR, PRIMARY KEY (run_id, step))""",
            "ALTER TABLE attempts ADD COLUMN step VARCHAR",
            "ALTER TABLE attempts ADD COLUMN counted_input_tokens INTEGER",
        ],
    ),
    # Re-ask with feedback survives a crash: a rejected attempt keeps the answer and the violations.
    (6, ["ALTER TABLE attempts ADD COLUMN feedback VARCHAR"]),
    # A `when:` share learned from history: what identifies a step's condition and its inputs.
    (7, ["ALTER TABLE run_steps ADD COLUMN when_key VARCHAR"]),
    # What a run ended with (state/runs.py): its output's rows by status, its failures by reason.
    (
        8,
        [f"ALTER TABLE runs ADD COLUMN {name} BIGINT" for name in END_ROW_COLUMNS]
        + ["ALTER TABLE runs ADD COLUMN failures VARCHAR"],
    ),
    # Prompt caching priced per attempt (engine/recorder.py): tokens read from and written to the
    # provider's cache, and what the attempt would have cost without it; each run's step names
    # the shared prefix it sent cache controls for (plan/prompt_cache.py learns hit rates by it).
    (
        9,
        [
            "ALTER TABLE attempts ADD COLUMN cache_read_tokens INTEGER",
            "ALTER TABLE attempts ADD COLUMN cache_write_tokens INTEGER",
            "ALTER TABLE attempts ADD COLUMN uncached_usd DOUBLE",
            "ALTER TABLE run_steps ADD COLUMN cache_key VARCHAR",
        ],
    ),
    # Reviewed labels (state/reviews.py): a person's value for one answer field of one row.
    (10, [REVIEWS_TABLE]),
    # Fallback models (engine/fallback.py): the model of each result and attempt, and the request
    # that answered a row its own model failed.
    (
        11,
        [
            "ALTER TABLE results ADD COLUMN model VARCHAR",
            "ALTER TABLE results ADD COLUMN answered_by VARCHAR",
            "ALTER TABLE attempts ADD COLUMN model VARCHAR",
        ],
    ),
    # Cache fees (state/cache_fees.py): Gemini explicit context caches' creation and storage.
    (12, [CACHE_FEES_TABLE]),
]
