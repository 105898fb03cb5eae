"""Named reads of the ledger: what the pilot, the planner, the report and the operator commands ask
of the state, so that no module outside `batchor/state/` names its tables.

Both backends inherit these reads (`StateStore` in state/base.py): their SQL is the portable
subset DuckDB and PostgreSQL agree on (`?` placeholders, fully fetched through `execute`); a
backend whose dialect differs overrides the read.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence


def _marks(values: Sequence[Any]) -> str:
    return ", ".join("?" * len(values))


_PILOT_RUNS = "SELECT run_id FROM run_steps WHERE kind = 'pilot'"


class LedgerReads(Protocol):
    """Reads of runs, attempts and the rows each job asked for, by what they mean."""

    def execute(self, sql: str, args: list[Any] | None = None) -> list[tuple[Any, ...]]:
        """Read queries in the portable subset (`?` placeholders), fully fetched."""
        ...

    # --- a pilot's runs ----------------------------------------------------------------------

    def billed_calls(self, run_ids: Sequence[str]) -> int:
        """Attempts of these runs that carry a cost (every billed call, re-asks included)."""
        if not run_ids:
            return 0
        sql = f"SELECT count(*) FROM attempts WHERE run_id IN ({_marks(run_ids)}) AND cost_usd IS NOT NULL"
        return int(self.execute(sql, list(run_ids))[0][0])

    def accepted_per_step(self, run_ids: Sequence[str], steps: Sequence[str]) -> dict[str, int]:
        """Per step of `steps`: the distinct requests these runs got an accepted answer for."""
        if not run_ids or not steps:
            return {}
        rows = self.execute(
            f"SELECT step, count(DISTINCT request_key) FROM attempts WHERE run_id IN ({_marks(run_ids)}) "
            f"AND step IN ({_marks(steps)}) AND outcome = 'ok' GROUP BY step",
            [*run_ids, *steps],
        )
        found = {str(step): int(n) for step, n in rows}
        return {step: found.get(step, 0) for step in steps}

    def requests_of_runs(self, run_ids: Sequence[str]) -> list[tuple[str, str, str]]:
        """(step, request_key, row_key) of every row the jobs of these runs asked for, each once."""
        if not run_ids:
            return []
        rows = self.execute(
            f"SELECT DISTINCT j.step, j.request_key, j.row_key FROM job_requests j JOIN runs r "
            f"ON r.job_id = j.job_id WHERE r.run_id IN ({_marks(run_ids)})",
            list(run_ids),
        )
        return [(str(step), str(request), str(row)) for step, request, row in rows]

    def rows_of_requests(self, job_id: str, request_keys: Sequence[str]) -> list[str]:
        """The job's row keys that asked any of these requests, each once (a streamed output's
        candidates after a flush: outputs/stream.py)."""
        found: set[str] = set()
        keys = list(dict.fromkeys(request_keys))
        for start in range(0, len(keys), 1000):
            part = keys[start : start + 1000]
            found.update(
                str(row)
                for (row,) in self.execute(
                    f"SELECT DISTINCT row_key FROM job_requests WHERE job_id = ? AND request_key IN ({_marks(part)})",
                    [job_id, *part],
                )
            )
        return sorted(found)

    def billed_attempts(self, run_ids: Sequence[str]) -> list[tuple[Any, ...]]:
        """The billed attempts of these runs: step, run_id, request_key, outcome, output tokens,
        estimated, attempt, input tokens, the plan's count of the input (0 where none)."""
        if not run_ids:
            return []
        return self.execute(
            "SELECT step, run_id, request_key, outcome, coalesce(output_tokens, 0), "
            "coalesce(estimated, false), attempt, coalesce(input_tokens, 0), "
            f"coalesce(counted_input_tokens, 0) FROM attempts WHERE run_id IN ({_marks(run_ids)}) "
            "AND cost_usd IS NOT NULL",
            list(run_ids),
        )

    def pilot_costs(self, name: str, mocked: bool) -> list[tuple[str, float]]:
        """(request_key, cost) of every billed attempt of a pilot run of the job `name`."""
        rows = self.execute(
            "SELECT a.request_key, coalesce(a.cost_usd, 0) FROM attempts a JOIN runs r ON r.run_id = a.run_id "
            f"WHERE r.name = ? AND r.mocked = ? AND a.cost_usd IS NOT NULL AND r.run_id IN ({_PILOT_RUNS})",
            [name, mocked],
        )
        return [(str(key), float(cost)) for key, cost in rows]

    def pilot_requests(self, name: str, mocked: bool) -> list[tuple[str, str, str, str]]:
        """(job_id, step, row_key, request_key) of every row a pilot job of `name` asked for."""
        rows = self.execute(
            "SELECT DISTINCT j.job_id, j.step, j.row_key, j.request_key FROM job_requests j "
            "WHERE j.job_id IN (SELECT r.job_id FROM runs r WHERE r.name = ? AND r.mocked = ? "
            f"AND r.run_id IN ({_PILOT_RUNS}))",
            [name, mocked],
        )
        return [(str(job), str(step), str(row), str(key)) for job, step, row, key in rows]

    # --- a job's earlier runs (plan/changes.py, operations, the engine) ---------------------

    def job_runs_of(self, name: str) -> list[tuple[str, str | None, Any]]:
        """(job_id, plan_path, started_at) of every run of the spec `name`, oldest first."""
        return [
            (str(job), path, started)
            for job, path, started in self.execute(
                "SELECT job_id, plan_path, started_at FROM runs WHERE name = ? ORDER BY started_at", [name]
            )
        ]

    def earlier_requests(self, name: str, step: str, job_id: str, *, distinct: bool = True) -> list[tuple[Any, ...]]:
        """(row_key, request_key, job_id) of the step's requests in the spec's other jobs."""
        return self.execute(
            f"SELECT {'DISTINCT ' if distinct else ''}j.row_key, j.request_key, j.job_id {_EARLIER}",
            [step, job_id, name],
        )

    def sent_before(self, name: str, step: str, job_id: str) -> bool:
        """Whether another job of the spec `name` sent the step any request."""
        return bool(self.execute(f"SELECT 1 {_EARLIER} LIMIT 1", [step, job_id, name]))

    def later_runs(self, job_id: str, started_at: Any) -> list[str]:
        """Runs of the job started after `started_at`, oldest first."""
        rows = self.execute(
            "SELECT run_id FROM runs WHERE job_id = ? AND started_at > ? ORDER BY started_at", [job_id, started_at]
        )
        return [str(run) for (run,) in rows]

    def collected_in_flight_runs(self, job_id: str, this_run: str) -> list[str]:
        """The job's other runs left `in_flight` none of whose batches still runs at the provider."""
        rows = self.execute(
            "SELECT run_id FROM runs r WHERE job_id = ? AND status = 'in_flight' AND run_id <> ? AND NOT EXISTS "
            "(SELECT 1 FROM batches b WHERE b.run_id = r.run_id AND b.state IN ('intent', 'submitted'))",
            [job_id, this_run],
        )
        return [str(run) for (run,) in rows]

    def pending_rejections(self, steps: Sequence[str]) -> list[tuple[str, int, str]]:
        """(request_key, attempt, feedback) of the rejected attempts of `steps` whose request has no
        result yet, oldest first (a re-ask a crash cut short)."""
        if not steps:
            return []
        return self.execute(
            f"SELECT a.request_key, a.attempt, a.feedback FROM attempts a WHERE a.step IN ({_marks(steps)}) "
            "AND a.feedback IS NOT NULL AND NOT EXISTS (SELECT 1 FROM results r WHERE r.request_key = a.request_key) "
            "ORDER BY a.created_at, a.attempt",
            list(steps),
        )

    def run_model_spend(self, run_id: str) -> list[dict[str, Any]]:
        """Per step and model of a run's attempts: calls answered and accepted, calls that failed or
        were rejected, and what they cost. A step answered by a fallback or an escalation model
        shows one line per model (`model` None: attempts recorded before batchor kept it)."""
        rows = self.execute(
            "SELECT step, model, count(*) FILTER (WHERE outcome = 'ok'), count(*) FILTER (WHERE outcome <> 'ok'), "
            "coalesce(sum(cost_usd), 0) FROM attempts WHERE run_id = ? GROUP BY step, model ORDER BY step, model",
            [run_id],
        )
        return [
            {"step": step, "model": model, "answered": int(ok), "failed": int(bad), "cost_usd": float(cost)}
            for step, model, ok, bad, cost in rows
        ]

    def step_costs(self, job_id: str) -> dict[str, float]:
        """What each step's answers of the job cost: every distinct request counted once."""
        rows = self.execute(
            "SELECT t.step, sum(t.cost_usd) FROM (SELECT DISTINCT j.step, r.request_key, r.cost_usd "
            "FROM job_requests j JOIN results r ON r.request_key = j.request_key WHERE j.job_id = ?) t "
            "GROUP BY t.step",
            [job_id],
        )
        return {str(step): float(cost or 0.0) for step, cost in rows}

    # --- a run report (report/data.py) -------------------------------------------------------

    def rows_by_status(self, job_id: str) -> list[tuple[Any, ...]]:
        """Per step of the job: (step, rows, succeeded, failed)."""
        return self.execute(
            "SELECT j.step, count(*), count(*) FILTER (WHERE r.status = 'succeeded'), "
            "count(*) FILTER (WHERE r.status = 'failed') FROM job_requests j "
            "LEFT JOIN results r ON r.request_key = j.request_key WHERE j.job_id = ? GROUP BY 1 ORDER BY 1",
            [job_id],
        )

    def run_attempt_figures(self, job_id: str, run_id: str) -> list[tuple[Any, ...]]:
        """Per step, the run's attempts: (step, attempts, requests sent, re-asked, rejected, input
        tokens, output tokens, cost, latency p50, p90, p99, max)."""
        return self.execute(
            "SELECT k.step, count(*), count(DISTINCT a.request_key), "
            "count(DISTINCT a.request_key) FILTER (WHERE a.attempt > 1), count(*) FILTER (WHERE a.outcome <> 'ok'), "
            "coalesce(sum(a.input_tokens), 0), coalesce(sum(a.output_tokens), 0), coalesce(sum(a.cost_usd), 0), "
            "percentile_cont(0.5) WITHIN GROUP (ORDER BY a.duration_ms), "
            "percentile_cont(0.9) WITHIN GROUP (ORDER BY a.duration_ms), "
            "percentile_cont(0.99) WITHIN GROUP (ORDER BY a.duration_ms), max(a.duration_ms) "
            f"FROM attempts a JOIN {_STEP_KEYS} k ON k.request_key = a.request_key WHERE a.run_id = ? GROUP BY 1",
            [job_id, run_id],
        )

    def run_latency_buckets(self, job_id: str, run_id: str) -> list[tuple[Any, ...]]:
        """(step, log2 bucket of the duration in ms, attempts) of the run's timed attempts."""
        return self.execute(
            "SELECT k.step, CAST(floor(ln(greatest(a.duration_ms, 1)) / ln(2)) AS INTEGER) AS b, count(*) "
            f"FROM attempts a JOIN {_STEP_KEYS} k ON k.request_key = a.request_key "
            "WHERE a.run_id = ? AND a.duration_ms IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2",
            [job_id, run_id],
        )

    def job_latency_p50(self, job_id: str) -> float | None:
        """Median duration (ms) of the timed attempts on the job's requests, whichever runs made
        them (a cached sample keeps the latency it was answered with); None: none timed."""
        rows = self.execute(
            "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY a.duration_ms) "
            f"FROM attempts a JOIN {_STEP_KEYS} k ON k.request_key = a.request_key WHERE a.duration_ms IS NOT NULL",
            [job_id],
        )
        return float(rows[0][0]) if rows and rows[0][0] is not None else None

    def failed_by_reason(self, job_id: str) -> list[tuple[Any, ...]]:
        """(step, error code, rows) of the job's failed rows, the most frequent first."""
        return self.execute(
            "SELECT j.step, coalesce(r.error_code, 'unknown'), count(*) FROM job_requests j "
            "JOIN results r ON r.request_key = j.request_key WHERE j.job_id = ? AND r.status = 'failed' "
            "GROUP BY 1, 2 ORDER BY 3 DESC",
            [job_id],
        )

    def failed_examples(self, job_id: str, per_reason: int) -> list[tuple[Any, ...]]:
        """(step, code, row_key, request_key, error): the first `per_reason` failed rows by row key
        of each (step, error code)."""
        return self.execute(
            "SELECT step, code, row_key, request_key, error FROM (SELECT j.step, "
            "coalesce(r.error_code, 'unknown') AS code, j.row_key, j.request_key, r.error, row_number() OVER "
            "(PARTITION BY j.step, r.error_code ORDER BY j.row_key) AS n FROM job_requests j JOIN results r "
            "ON r.request_key = j.request_key WHERE j.job_id = ? AND r.status = 'failed') t WHERE n <= ? "
            "ORDER BY 1, 2, 3",
            [job_id, per_reason],
        )

    def last_raw(self, request_key: str) -> Any:
        """The stored raw response of the request's latest attempt that kept one (packed), else None."""
        rows = self.execute(
            "SELECT raw FROM attempts WHERE request_key = ? AND raw IS NOT NULL ORDER BY created_at DESC LIMIT 1",
            [request_key],
        )
        return rows[0][0] if rows else None

    def answered_samples(self, job_id: str, per_step: int) -> list[tuple[Any, ...]]:
        """(step, row_key, output): the first `per_step` answered rows of each step by row key."""
        return self.execute(
            "SELECT step, row_key, output FROM (SELECT j.step, j.row_key, r.output, row_number() OVER "
            "(PARTITION BY j.step ORDER BY j.row_key) AS n FROM job_requests j JOIN results r "
            "ON r.request_key = j.request_key WHERE j.job_id = ? AND r.status = 'succeeded') t WHERE n <= ? "
            "ORDER BY 1, 2",
            [job_id, per_step],
        )


_EARLIER = (
    "FROM job_requests j WHERE j.step = ? AND j.job_id <> ? AND j.job_id IN (SELECT job_id FROM runs WHERE name = ?)"
)
_STEP_KEYS = "(SELECT DISTINCT step, request_key FROM job_requests WHERE job_id = ?)"
