"""Ordered schema migrations for PostgreSQL state (the same tables as `migrations.py`, in PostgreSQL DDL).

Versions 1 and 2 mirror the DuckDB migrations of the same number; version 3 adds what only a
shared state needs: workers (heartbeats), work items (claims with leases) and shared rate buckets.
Applied versions are rows of `batchor_migrations`; `PostgresStore` applies the missing ones in one
transaction under an advisory lock, so several processes opening a fresh database at once are safe.
Append new migrations; never edit a released one.
"""

from __future__ import annotations

from batchor.state.base import END_ROW_COLUMNS
from batchor.state.cache_fees import PG_CACHE_FEES_TABLE
from batchor.state.reviews import REVIEWS_TABLE

MIGRATIONS_TABLE = """CREATE TABLE IF NOT EXISTS batchor_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"""

MIGRATIONS: list[tuple[int, str, list[str]]] = [
    (
        1,
        "runs, results, job_requests, attempts",
        [
            """CREATE TABLE IF NOT EXISTS runs (
            run_id TEXT PRIMARY KEY, job_id TEXT, plan_id TEXT, name TEXT, status TEXT, mocked BOOLEAN,
            requests BIGINT, succeeded BIGINT, failed BIGINT, cached BIGINT, skipped BIGINT,
            input_tokens BIGINT, output_tokens BIGINT, cost_usd DOUBLE PRECISION, paused_reason TEXT,
            output_path TEXT, plan_path TEXT, started_at TIMESTAMP, finished_at TIMESTAMP)""",
            "CREATE INDEX IF NOT EXISTS runs_job ON runs (job_id, started_at)",
            """CREATE TABLE IF NOT EXISTS results (
            request_key TEXT PRIMARY KEY, step TEXT, status TEXT, output TEXT, error_code TEXT, error TEXT,
            attempts SMALLINT, input_tokens INTEGER, output_tokens INTEGER, cost_usd DOUBLE PRECISION,
            run_id TEXT, finished_at TIMESTAMP)""",
            "CREATE INDEX IF NOT EXISTS results_run ON results (run_id)",
            """CREATE TABLE IF NOT EXISTS job_requests (
            job_id TEXT, step TEXT, row_key TEXT, request_key TEXT, PRIMARY KEY (job_id, step, row_key))""",
            """CREATE TABLE IF NOT EXISTS attempts (
            request_key TEXT, run_id TEXT, attempt SMALLINT, outcome TEXT, status_code SMALLINT, error TEXT,
            duration_ms INTEGER, raw BYTEA, created_at TIMESTAMP)""",
            "CREATE INDEX IF NOT EXISTS attempts_run ON attempts (run_id, created_at)",
            "CREATE INDEX IF NOT EXISTS attempts_key ON attempts (request_key)",
        ],
    ),
    (
        2,
        "provider batches",
        [
            """CREATE TABLE IF NOT EXISTS batches (
            batch_id TEXT PRIMARY KEY, job_id TEXT, run_id TEXT, step TEXT, step_fp TEXT, provider TEXT,
            model TEXT, connection TEXT, chunk INTEGER, state TEXT, remote_id TEXT, remote_status TEXT,
            requests INTEGER, input_tokens BIGINT, bytes BIGINT, succeeded INTEGER, failed INTEGER,
            requeued INTEGER, error TEXT, created_s DOUBLE PRECISION, created_at TIMESTAMP,
            submitted_at TIMESTAMP, updated_at TIMESTAMP, ended_at TIMESTAMP)""",
            "CREATE INDEX IF NOT EXISTS batches_fp ON batches (step_fp, state)",
            "CREATE TABLE IF NOT EXISTS batch_requests (batch_id TEXT, request_key TEXT, outcome TEXT)",
            "CREATE INDEX IF NOT EXISTS batch_requests_batch ON batch_requests (batch_id)",
            "CREATE INDEX IF NOT EXISTS batch_requests_key ON batch_requests (request_key)",
        ],
    ),
    (
        3,
        "workers, work items with leases, shared rate buckets",
        [
            # A worker's claims are valid while its lease (renewed by its heartbeat) has not passed:
            # one row update renews every claim of the worker at once.
            """CREATE TABLE IF NOT EXISTS workers (
            worker_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, job_id TEXT, host TEXT, pid INTEGER,
            status TEXT NOT NULL, started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now(), lease_until TIMESTAMPTZ NOT NULL,
            requests BIGINT DEFAULT 0, succeeded BIGINT DEFAULT 0, failed BIGINT DEFAULT 0,
            cached BIGINT DEFAULT 0, skipped BIGINT DEFAULT 0, input_tokens BIGINT DEFAULT 0,
            output_tokens BIGINT DEFAULT 0, cost_usd DOUBLE PRECISION DEFAULT 0)""",
            "CREATE INDEX IF NOT EXISTS workers_run ON workers (run_id)",
            """CREATE TABLE IF NOT EXISTS work_items (
            run_id TEXT, step TEXT, request_key TEXT, position BIGINT NOT NULL, worker_id TEXT,
            claimed_at TIMESTAMPTZ, done BOOLEAN NOT NULL DEFAULT false,
            PRIMARY KEY (run_id, step, request_key))""",
            "CREATE INDEX IF NOT EXISTS work_items_open ON work_items (run_id, step, position) WHERE NOT done",
            "CREATE INDEX IF NOT EXISTS work_items_key ON work_items (request_key) WHERE NOT done",
            "CREATE INDEX IF NOT EXISTS work_items_worker ON work_items (worker_id) WHERE NOT done",
            """CREATE TABLE IF NOT EXISTS rate_buckets (
            rate_key TEXT PRIMARY KEY, rpm DOUBLE PRECISION, tpm DOUBLE PRECISION, burst_s DOUBLE PRECISION,
            requests DOUBLE PRECISION NOT NULL, tokens DOUBLE PRECISION NOT NULL,
            updated_at TIMESTAMPTZ NOT NULL, paused_until TIMESTAMPTZ)""",
        ],
    ),
    (
        4,
        "a --max-cost budget shared by a run's workers",
        [
            # `committed_usd` is what workers have drawn (spent or held for requests in flight);
            # a worker's unspent hold goes back when it leaves, a dead worker's stays drawn.
            """CREATE TABLE IF NOT EXISTS run_budgets (
            run_id TEXT PRIMARY KEY, limit_usd DOUBLE PRECISION NOT NULL,
            committed_usd DOUBLE PRECISION NOT NULL DEFAULT 0)""",
            "ALTER TABLE workers ADD COLUMN IF NOT EXISTS budget_drawn DOUBLE PRECISION NOT NULL DEFAULT 0",
        ],
    ),
    (
        5,
        "the ledger of attempts: tokens and cost of every billed response",
        [
            "ALTER TABLE attempts ADD COLUMN IF NOT EXISTS input_tokens INTEGER",
            "ALTER TABLE attempts ADD COLUMN IF NOT EXISTS output_tokens INTEGER",
            "ALTER TABLE attempts ADD COLUMN IF NOT EXISTS cost_usd DOUBLE PRECISION",
            "ALTER TABLE attempts ADD COLUMN IF NOT EXISTS estimated BOOLEAN",
        ],
    ),
    (
        6,
        "estimates that learn: each run's per-step estimate, each attempt's step and planned input count",
        [
            """CREATE TABLE IF NOT EXISTS run_steps (
            run_id TEXT, step TEXT, kind TEXT, length_key TEXT, model TEXT, requests BIGINT, input_tokens BIGINT,
            output_tokens BIGINT, expected_usd DOUBLE PRECISION, upper_usd DOUBLE PRECISION, output_source TEXT,
            input_source TEXT, PRIMARY KEY (run_id, step))""",
            "CREATE INDEX IF NOT EXISTS run_steps_length ON run_steps (length_key)",
            "CREATE INDEX IF NOT EXISTS run_steps_model ON run_steps (model)",
            "ALTER TABLE attempts ADD COLUMN IF NOT EXISTS step TEXT",
            "ALTER TABLE attempts ADD COLUMN IF NOT EXISTS counted_input_tokens INTEGER",
        ],
    ),
    (
        7,
        "re-ask feedback survives a crash: a rejected attempt keeps the answer and the violations",
        [
            "ALTER TABLE attempts ADD COLUMN IF NOT EXISTS feedback TEXT",
            "CREATE INDEX IF NOT EXISTS attempts_feedback ON attempts (step) WHERE feedback IS NOT NULL",
        ],
    ),
    (
        8,
        "a `when:` share learned from history: what identifies a step's condition and its inputs",
        [
            "ALTER TABLE run_steps ADD COLUMN IF NOT EXISTS when_key TEXT",
            "CREATE INDEX IF NOT EXISTS run_steps_when ON run_steps (when_key) WHERE when_key IS NOT NULL",
        ],
    ),
    (
        9,
        "what a run ended with: its output's rows by status, its failures by reason",
        [
            *(f"ALTER TABLE runs ADD COLUMN IF NOT EXISTS {name} BIGINT" for name in END_ROW_COLUMNS),
            "ALTER TABLE runs ADD COLUMN IF NOT EXISTS failures TEXT",
        ],
    ),
    (
        10,
        "prompt caching per attempt: tokens read from and written to the cache, the cost without it",
        [
            "ALTER TABLE attempts ADD COLUMN IF NOT EXISTS cache_read_tokens INTEGER",
            "ALTER TABLE attempts ADD COLUMN IF NOT EXISTS cache_write_tokens INTEGER",
            "ALTER TABLE attempts ADD COLUMN IF NOT EXISTS uncached_usd DOUBLE PRECISION",
            "ALTER TABLE run_steps ADD COLUMN IF NOT EXISTS cache_key TEXT",
        ],
    ),
    (11, "reviewed labels: a person's value for one answer field of one row", [REVIEWS_TABLE]),
    (
        12,
        "fallback models: the model of each result and attempt, the request that answered a failed one",
        [
            "ALTER TABLE results ADD COLUMN IF NOT EXISTS model TEXT",
            "ALTER TABLE results ADD COLUMN IF NOT EXISTS answered_by TEXT",
            "ALTER TABLE attempts ADD COLUMN IF NOT EXISTS model TEXT",
        ],
    ),
    (13, "cache fees: explicit context caches' creation and storage, per run and step", [PG_CACHE_FEES_TABLE]),
]

SCHEMA_VERSION = MIGRATIONS[-1][0]
