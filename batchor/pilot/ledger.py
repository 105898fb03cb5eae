"""The pilot's reads of the ledger, all in one place: its billed calls, the answers each step got,
the attempts a stratified top-up weighs, and what the pilots of a job spent on its rows.

The SQL is the state's (named `StateStore` reads, state/reads.py); this module turns the rows into
what the pilot reasons about.

What the pilots of a job spent on its rows is the known part of the whole job's cost.

A pilot's rows are cached, part of the job: the whole job is what was paid for them plus the rest's
estimate. That spend is read from the ledger, not summed from the runs at hand, so a second pilot
(`--pilot 160` after `--pilot 20`, the same seed: the first one's rows are cached in it) counts
the first one's spend, and `--pilot auto`'s rounds are not counted twice. An attempt counts when
it was billed to a pilot run of the spec (its name, rehearsal or not) on a request of a row of this
job whose root steps' requests are the full plan's for that row (the same input row and prompts;
the steps below them count on those rows): a pilot of an earlier prompt does not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from batchor.plan.model import req_column
from batchor.plan.plan_file import CompiledPlan
from batchor.spec.inputs import ROW_KEY
from batchor.state.base import StateStore

if TYPE_CHECKING:
    from batchor.pilot.strata import Stratum


def calls_made(store: StateStore, run_ids: list[str]) -> int:
    """Billed calls of the pilot's runs: every attempt that carries a cost (re-asks included)."""
    return store.billed_calls(run_ids)


def answers_per_step(store: StateStore, run_ids: list[str], steps: tuple[str, ...]) -> dict[str, int]:
    """Accepted answers of `steps` in the pilot's runs (distinct requests answered)."""
    return store.accepted_per_step(run_ids, steps)


def drawn_inside(store: StateStore, before: list[str], stratum: Stratum) -> int:
    """The stratum's rows drawn so far: the pilot's own there, and the rows a smaller pilot of the
    same seed (--pilot auto's earlier round) drew there (the first of its candidates: nested)."""
    if not before:
        return stratum.pilot_inside
    earlier = {row for _, _, row in store.requests_of_runs(before)}
    return stratum.pilot_inside + sum(1 for key in stratum.candidates if key in earlier)


class PilotAttempt(NamedTuple):
    """A billed attempt of the pilot and whether its request's row lies in the stratum."""

    step: str
    run_id: str
    request_key: str
    outcome: str
    output_tokens: int
    estimated: bool  # tokens not reported by the provider: not an answer length
    inside: bool
    attempt: int = 1  # its number among its request's attempts (re-asks in stages, state/answer_stats.py)
    input_tokens: int = 0
    counted_input: int = 0  # the plan's count of its input (a first attempt's; 0 otherwise)


def pilot_attempts(store: StateStore, run_ids: list[str], stratum: Stratum) -> list[PilotAttempt]:
    """The pilot's billed attempts, each with whether its request's row lies in the stratum
    (through the rows each run's job asked it for)."""
    if not run_ids:
        return []
    inside = {(step, request) for step, request, row in store.requests_of_runs(run_ids) if row in stratum.inside}
    return [
        PilotAttempt(
            str(step),
            str(run),
            str(request),
            str(outcome),
            int(tokens),
            bool(estimated),
            (str(step), str(request)) in inside,
            int(attempt or 1),
            int(tokens_in),
            int(counted),
        )
        for step, run, request, outcome, tokens, estimated, attempt, tokens_in, counted in store.billed_attempts(
            run_ids
        )
    ]


def pilots_spent(store: StateStore, full: CompiledPlan) -> float:
    """The ledger's cost of every pilot attempt on a request of this job (see the module's docstring)."""
    name, mocked = full.header.name, bool(full.header.mocked)
    attempts = store.pilot_costs(name, mocked)
    if not attempts:
        return 0.0
    keys = _job_keys(store.pilot_requests(name, mocked), full)
    return float(sum(cost for key, cost in attempts if key in keys))


def _job_keys(requests: list[tuple[str, str, str, str]], full: CompiledPlan) -> set[str]:
    """The pilots' request keys that belong to this job: on a pilot's row whose root requests are
    the plan's for that row (each pilot job judged on its own)."""
    roots = [s.name for s in full.header.steps if req_column(s.name, "key") in full.data_columns()]
    planned = _root_keys(full, roots, {str(row) for _, _, row, _ in requests})
    same: dict[tuple[str, str], bool] = {}
    for job, step, row, key in requests:
        if step in roots:
            same[job, row] = same.get((job, row), True) and planned.get((step, str(row))) == key
    return {key for job, _, row, key in requests if same.get((job, row), False)}


def _root_keys(full: CompiledPlan, roots: list[str], rows: set[str]) -> dict[tuple[str, str], str]:
    """The full plan's request key of each root step on the pilots' rows."""
    found: dict[tuple[str, str], str] = {}
    if not roots or not rows:
        return found
    for batch in full.iter_batches([ROW_KEY, *(req_column(step, "key") for step in roots)]):
        data = batch.to_pydict()
        for i, row in enumerate(data[ROW_KEY]):
            if str(row) in rows:
                found.update({(step, str(row)): data[req_column(step, "key")][i] for step in roots})
    return found
