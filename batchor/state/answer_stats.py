"""What the answers already paid for say about the next plan: output lengths per step and how a
model's tokenizer compares to the plan's token count. Read from the ledger, never kept as totals.

Each run stores its plan's per-step estimate in `run_steps`, with the step's `length_key` (what
decides an answer's length: model, output schema or text, templates; see plan/estimate.py) and
the run's kind (`apply`, `pilot`, ...). Each billed attempt names its step, its tokens and, on a
first attempt, the plan's count of the input sent. So the statistics of a length key are sums over
the billed attempts of every run whose step had that key, in portable SQL (DuckDB and PostgreSQL).

Public API (the pilot helper and `plan` use it):
- `record_run_steps(store, run_id, estimates, kind="apply")`: store a run's per-step estimate;
- `tag_run_kind(store, run_id, kind)`: mark a run's answers as e.g. `pilot` answers;
- `output_stats(store, length_keys)`: per key, per run kind, the answers' length statistics;
- `input_calibration(store, models)`: per `provider:model`, reported vs counted input tokens;
- `when_share(store, when_key, upstream)`: rows a `when:` let run, of those it was evaluated on;
- `stored_answers(store, length_key)`: a few accepted answers of a length key (projections' samples);
- `run_step_report(store, run_id)`: per step, the plan's estimate next to what the run spent.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from batchor.state.base import StateStore
from batchor.state.length_stats import InputCalibration, KeyStats, OutputStats

RUN_KINDS = ("apply", "pilot")
_ESTIMATE_COLUMNS = (
    "step",
    "length_key",
    "model",
    "requests",
    "input_tokens",
    "output_tokens",
    "expected_usd",
    "upper_usd",
    "output_source",
    "input_source",
    "when_key",
    "cache_key",
)
# An answer that counts: billed, accepted or not, with usage reported by the provider.
_BILLED = "coalesce(a.output_tokens, 0) > 0 AND NOT coalesce(a.estimated, false)"
_TOKENS = "CAST(a.output_tokens AS DOUBLE PRECISION)"  # squared and cubed: past an integer's range
_COUNTED = "CAST(a.counted_input_tokens AS DOUBLE PRECISION)"
_FIT = "FILTER (WHERE a.outcome = 'ok' AND a.counted_input_tokens > 0)"  # accepted first answers, counted input
_FIT_SUMS = (
    f"count(*) {_FIT}, coalesce(sum({_COUNTED}) {_FIT}, 0), coalesce(sum({_COUNTED} * {_COUNTED}) {_FIT}, 0), "
    f"coalesce(sum({_TOKENS}) {_FIT}, 0), coalesce(sum({_TOKENS} * {_TOKENS}) {_FIT}, 0), "
    f"coalesce(sum({_COUNTED} * {_TOKENS}) {_FIT}, 0)"
)
_FIT_FIELDS = ("fit_answers", "fit_input", "fit_input_sq", "fit_output", "fit_output_sq", "fit_cross")


@dataclass(frozen=True)
class StepEstimate:
    """One step's estimate as a plan made it (stored with each run that applies the plan)."""

    step: str
    length_key: str
    model: str  # provider:model
    requests: int
    input_tokens: int
    output_tokens: int
    expected_usd: float
    upper_usd: float
    output_source: str  # heuristic | history: N answers | pilot: N answers
    input_source: str  # exact | calibrated: N answers | estimate
    when_key: str | None = None  # a `when:` step: its condition and the steps it reads (plan/estimate.py)
    cache_key: str | None = (
        None  # the shared prefix it sent prompt-cache controls for, and its mode (plan/prompt_cache.py)
    )


def record_run_steps(store: StateStore, run_id: str, estimates: list[StepEstimate], kind: str = "apply") -> None:
    """Store a run's per-step estimate (once per run: workers joining a shared run add nothing)."""
    if not estimates:
        return
    columns = ("run_id", "kind", *_ESTIMATE_COLUMNS)
    marks = "(" + ", ".join("?" * len(columns)) + ")"
    values = [v for e in estimates for v in (run_id, kind, *(getattr(e, c) for c in _ESTIMATE_COLUMNS))]
    store.execute(
        f"INSERT INTO run_steps ({', '.join(columns)}) VALUES {', '.join([marks] * len(estimates))} "
        "ON CONFLICT DO NOTHING",
        values,
    )


def tag_run_kind(store: StateStore, run_id: str, kind: str) -> None:
    """Mark every answer of a run as `kind` answers (a pilot's answers read `pilot: N answers`)."""
    store.execute("UPDATE run_steps SET kind = ? WHERE run_id = ?", [kind, run_id])


def output_stats(store: StateStore, length_keys: list[str]) -> dict[str, KeyStats]:
    """Per length key: billed attempts and accepted answers' output tokens, per run kind."""
    found: dict[str, dict[str, OutputStats]] = {key: {} for key in length_keys}
    rows = _billed_by_step(
        store,
        "s.length_key, coalesce(s.kind, 'apply')",
        "s.length_key",
        length_keys,
        "count(*) FILTER (WHERE a.outcome = 'ok'), count(*), "
        "coalesce(sum(a.output_tokens) FILTER (WHERE a.outcome = 'ok'), 0), "
        f"coalesce(sum({_TOKENS} * {_TOKENS}) FILTER (WHERE a.outcome = 'ok'), 0), "
        "coalesce(sum(a.output_tokens), 0), coalesce(max(a.output_tokens), 0), "
        "count(DISTINCT a.run_id || ':' || a.request_key), "
        f"coalesce(sum({_TOKENS} * {_TOKENS} * {_TOKENS}) FILTER (WHERE a.outcome = 'ok'), 0), "
        + ", ".join(f"coalesce(sum(power(ln({_TOKENS}), {k})) FILTER (WHERE a.outcome = 'ok'), 0)" for k in (1, 2, 3))
        + ", "
        + _FIT_SUMS,
    )
    stages = reask_stats(store, sorted({str(row[0]) for row in rows}))  # keys with no billed answer have none
    for key, kind, answers, attempts, tokens, squares, attempt_tokens, most, requests, cubes, *sums in rows:
        stats = OutputStats(
            int(answers),
            int(attempts),
            int(tokens),
            float(squares),
            int(attempt_tokens),
            int(most),
            int(requests),
            float(cubes),
            int(requests),  # each request: one first ask
            *stages.get((key, kind), (0,) * 8),
            *(float(v) for v in sums[:3]),
        )
        fit: dict[str, Any] = {f: float(v) for f, v in zip(_FIT_FIELDS, sums[3:])}
        found[key][kind] = dataclasses.replace(stats, **(fit | {"fit_answers": int(sums[3])}))
    return {key: KeyStats(kinds) for key, kinds in found.items()}


REJECTED = "a.outcome = 'invalid_output'"
"""A billed answer the validator rejected: asked again with feedback (schema/feedback.py)."""
TRUNCATED = "outcome = 'truncated'"
"""A billed answer cut by the token limit: asked again only with `limits.on_truncation: reask`."""


def reask_stats(store: StateStore, length_keys: list[str]) -> dict[tuple[str, str], tuple[int, ...]]:
    """Per (length key, run kind): first attempts rejected and failed for good, re-asks (rejected
    again), the re-asks' output tokens and the input they added beyond their request's first
    attempt, first attempts and re-asks truncated. A request's billed attempts in order: the first
    is its first ask, the rest re-asks.
    Only requests with a billed attempt not accepted can have any of these: the others (nearly all)
    are left out before the window (a 2M-attempt ledger, 2 % rejected: 0.9 s instead of 5.3 s)."""
    if not length_keys:
        return {}
    marks = ", ".join("?" * len(length_keys))
    not_accepted = f"SELECT DISTINCT a.run_id, a.request_key FROM attempts a WHERE a.outcome <> 'ok' AND {_BILLED}"
    rows = store.execute(
        "SELECT k, kind, count(*) FILTER (WHERE n = 1 AND rejected), "
        "count(*) FILTER (WHERE n = 1 AND NOT rejected AND outcome <> 'ok'), count(*) FILTER (WHERE n > 1), "
        "count(*) FILTER (WHERE n > 1 AND rejected), coalesce(sum(tokens_out) FILTER (WHERE n > 1), 0), "
        "coalesce(sum(tokens_in - first_in) FILTER (WHERE n > 1), 0), count(*) FILTER (WHERE n = 1 AND "
        f"{TRUNCATED}), count(*) FILTER (WHERE n > 1 AND {TRUNCATED}) FROM (SELECT s.length_key AS k, "
        f"coalesce(s.kind, 'apply') AS kind, a.outcome, {REJECTED} AS rejected, a.output_tokens AS tokens_out, "
        "coalesce(a.input_tokens, 0) AS tokens_in, row_number() OVER w AS n, "
        "first_value(coalesce(a.input_tokens, 0)) OVER w AS first_in FROM run_steps s JOIN attempts a "
        f"ON a.run_id = s.run_id AND a.step = s.step JOIN ({not_accepted}) f ON f.run_id = a.run_id "
        f"AND f.request_key = a.request_key WHERE s.length_key IN ({marks}) AND {_BILLED} "
        "WINDOW w AS (PARTITION BY a.run_id, a.step, a.request_key ORDER BY a.attempt)) t GROUP BY k, kind",
        list(length_keys),
    )
    return {(str(k), str(kind)): tuple(int(v or 0) for v in values) for k, kind, *values in rows}


def input_calibration(store: StateStore, models: list[str]) -> dict[str, InputCalibration]:
    """Per `provider:model`: what the provider reported as input tokens against the plan's count."""
    rows = _billed_by_step(
        store,
        "s.model",
        "s.model",
        models,
        "count(*), sum(a.counted_input_tokens), sum(a.input_tokens), "
        "max(a.input_tokens * 1.0 / a.counted_input_tokens), "
        "sum(a.input_tokens * 1.0 / a.counted_input_tokens), "
        "sum((a.input_tokens * 1.0 / a.counted_input_tokens) * (a.input_tokens * 1.0 / "
        "a.counted_input_tokens))",
        "a.counted_input_tokens > 0 AND a.input_tokens > 0",
    )
    found = {model: InputCalibration() for model in models}
    for model, n, counted, reported, most, ratios, squares in rows:
        found[model] = InputCalibration(
            int(n), int(counted), int(reported), float(most), float(ratios or 0.0), float(squares or 0.0)
        )
    return found


def _billed_by_step(
    store: StateStore, group: str, column: str, values: list[str], aggregates: str, where: str = "true"
) -> list[tuple[Any, ...]]:
    """`aggregates` over the billed attempts of run steps whose `column` is one of `values`.
    Asks first whether any run step has one of them: such a query costs DuckDB 7-17 ms of CPU to
    bind and plan even over empty tables, the probe under 1 ms, and every plan on a new state (a
    first run, most tests) has no history."""
    if not values:
        return []
    marks = ", ".join("?" * len(values))
    if not store.execute(f"SELECT 1 FROM run_steps s WHERE {column} IN ({marks}) LIMIT 1", list(values)):
        return []
    rows: list[tuple[Any, ...]] = store.execute(
        f"SELECT {group}, {aggregates} FROM run_steps s JOIN attempts a ON a.run_id = s.run_id AND a.step = s.step "
        f"WHERE {column} IN ({marks}) AND {where} AND {_BILLED} GROUP BY {group}",
        list(values),
    )
    return rows


WHEN_ROWS = 50_000
"""Rows of earlier jobs a `when:` share is read from at most: a share's binomial error at that many
is below 0.3 %, and reading every row of a 10M-row history would slow every plan by seconds."""


def when_share(store: StateStore, when_key: str, upstream: list[str]) -> tuple[int, int]:
    """(rows run, rows evaluated) of earlier jobs' steps with this `when_key` (up to WHEN_ROWS of
    their rows): rows whose upstream answers all exist, where the step sent a request (the
    condition held) or none (it did not). A row drawn by several jobs (a pilot, its top-up, the
    full run) counts once."""
    if not upstream:
        return 0, 0
    joins = " ".join(
        f"JOIN job_requests u{i} ON u{i}.job_id = j.job_id AND u{i}.row_key = j.row_key "
        f"AND u{i}.step = ? JOIN results r{i} ON r{i}.request_key = u{i}.request_key "
        f"AND r{i}.status = 'succeeded'"
        for i in range(len(upstream))
    )
    keys = ", ".join(f"u{i}.request_key" for i in range(len(upstream)))
    rows = store.execute(
        "SELECT count(*) FILTER (WHERE ran), count(*) FROM (SELECT DISTINCT j.row_key, "
        f"{keys}, j.request_key IS NOT NULL AS ran FROM (SELECT q.* FROM job_requests q JOIN (SELECT DISTINCT "
        "r.job_id, s.step FROM run_steps s JOIN runs r ON r.run_id = s.run_id WHERE s.when_key = ?) k "
        f"ON q.job_id = k.job_id AND q.step = k.step LIMIT {WHEN_ROWS}) j {joins}) t",
        [when_key, *upstream],
    )
    ran, evaluated = rows[0] if rows else (0, 0)
    return int(ran or 0), int(evaluated or 0)


def other_model_counts(store: StateStore, length_key: str, model: str) -> dict[str, tuple[int, int, int, int]]:
    """Per run kind (apply, pilot), among earlier runs' requests of this length key sent to `model`,
    the step's own model: (requests that fell back, requests settled, requests escalated, requests
    answered). A request that fell back is stored failed, linked to the answer (`answered_by`,
    engine/fallback.py); one escalated is stored answered, linked to the stronger model's answer."""
    rows = store.execute(
        "SELECT s.kind, count(*) FILTER (WHERE r.status = 'failed' AND r.answered_by IS NOT NULL), count(*), "
        "count(*) FILTER (WHERE r.status = 'succeeded' AND r.answered_by IS NOT NULL), "
        "count(*) FILTER (WHERE r.status = 'succeeded') "
        "FROM (SELECT DISTINCT run_id, step, coalesce(kind, 'apply') AS kind FROM run_steps WHERE length_key = ?) s "
        "JOIN results r ON r.run_id = s.run_id AND r.step = s.step WHERE r.model = ? GROUP BY s.kind",
        [length_key, model],
    )
    return {str(kind): (int(fell), int(settled), int(up), int(answered)) for kind, fell, settled, up, answered in rows}


def stored_answers(store: StateStore, length_key: str, limit: int = 32) -> list[str]:
    """Up to `limit` accepted answers (their stored output) of earlier runs' steps with this length key."""
    rows = store.execute(
        "SELECT r.output FROM (SELECT DISTINCT a.request_key FROM run_steps s JOIN attempts a "
        "ON a.run_id = s.run_id AND a.step = s.step WHERE s.length_key = ? AND a.outcome = 'ok' "
        f"LIMIT {int(limit)}) k JOIN results r ON r.request_key = k.request_key "
        "WHERE r.status = 'succeeded'",
        [length_key],
    )
    return [str(output) for (output,) in rows if output is not None]


def run_step_report(store: StateStore, run_id: str) -> list[dict[str, Any]]:
    """Per step of a run: the plan's estimate, what its attempts cost, and actual / expected.

    The ratio compares like with like: a run that had only part of its requests answered or billed (interrupted,
    stopped by its budget, a pilot cut by its allowance) is held to the plan's expected cost of
    that part (`settled_expected_usd`), not of the whole plan, which read as an estimate 5x too high.
    A run that ended with no row pending settled its whole plan, whatever it sent: a `when:` step's
    expected cost already counts only the share of its rows expected to run (30 planned, 10 sent
    and the other 20 skipped is all of it, not a third)."""
    pending = store.execute("SELECT rows_pending FROM runs WHERE run_id = ?", [run_id])
    finished = bool(pending) and pending[0][0] == 0
    estimates = store.execute(
        f"SELECT {', '.join(_ESTIMATE_COLUMNS)}, kind FROM run_steps WHERE run_id = ? ORDER BY step", [run_id]
    )
    rows = store.execute(
        "SELECT step, coalesce(sum(cost_usd), 0), coalesce(sum(input_tokens), 0), "
        "coalesce(sum(output_tokens), 0), count(DISTINCT request_key) FILTER "
        "(WHERE outcome = 'ok' OR coalesce(cost_usd, 0) > 0) FROM attempts "
        "WHERE run_id = ? GROUP BY step",
        [run_id],
    )
    spent = {
        step: (float(cost), int(tokens_in), int(tokens_out), int(keys))
        for step, cost, tokens_in, tokens_out, keys in rows
    }
    report = []
    for row in estimates:
        entry = dict(zip((*_ESTIMATE_COLUMNS, "kind"), row))
        cost, tokens_in, tokens_out, sent = spent.get(entry["step"], (0.0, 0, 0, 0))
        planned = int(entry["requests"] or 0)
        done = planned if finished else min(sent, planned)  # answered or billed (a row cut mid re-ask counts)
        expected = float(entry["expected_usd"] or 0.0)
        part = expected * done / planned if planned else expected
        entry.update(
            actual_usd=cost,
            actual_input_tokens=tokens_in,
            actual_output_tokens=tokens_out,
            settled_requests=done,
            settled_expected_usd=part,
            ratio=cost / part if part > 0 else None,
        )
        report.append(entry)
    return report


def report_totals(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """A run's steps together: expected and at most (whole plan), spent, and actual / expected of
    the part it settled (see run_step_report)."""
    expected = sum(float(s["expected_usd"] or 0.0) for s in steps)
    part = sum(float(s.get("settled_expected_usd", s["expected_usd"]) or 0.0) for s in steps)
    actual = sum(float(s["actual_usd"]) for s in steps)
    return {
        "expected_usd": expected,
        "upper_usd": sum(float(s["upper_usd"] or 0.0) for s in steps),
        "actual_usd": actual,
        "settled_expected_usd": part,
        "ratio": actual / part if part > 0 else None,
        "requests": sum(int(s["requests"] or 0) for s in steps),
        "settled_requests": sum(int(s.get("settled_requests", s["requests"]) or 0) for s in steps),
    }
