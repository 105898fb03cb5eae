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
