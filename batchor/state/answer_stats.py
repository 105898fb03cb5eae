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

import math
from dataclasses import dataclass, field
from typing import Any

RUN_KINDS = ("apply", "pilot")
_ESTIMATE_COLUMNS = ("step", "length_key", "model", "requests", "input_tokens", "output_tokens", "expected_usd",
                     "upper_usd", "output_source", "input_source", "when_key")
# An answer that counts: billed, accepted or not, with usage reported by the provider.
_BILLED = "coalesce(a.output_tokens, 0) > 0 AND NOT coalesce(a.estimated, false)"
_TOKENS = "CAST(a.output_tokens AS DOUBLE PRECISION)"  # squared and cubed: past an integer's range


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


@dataclass(frozen=True)
class OutputStats:
    """Output-token statistics of one length key (one run kind, or all of them)."""

    answers: int = 0  # accepted answers
    attempts: int = 0  # billed attempts, rejected ones included
    answer_tokens: int = 0  # output tokens of the accepted answers
    answer_tokens_sq: float = 0.0
    attempt_tokens: int = 0  # output tokens of every billed attempt
    max_tokens: int = 0
    # distinct requests with a billed attempt (answered in the end or not), per run: a request asked
    # again by a later run (--no-cache, --refresh) is a request again, not more attempts of one
    requests: int = 0
    answer_tokens_cu: float = 0.0  # sum of the accepted answers' output tokens cubed: their skewness

    @property
    def mean(self) -> float:
        return self.answer_tokens / self.answers if self.answers else 0.0

    @property
    def stdev(self) -> float:
        if self.answers < 2:
            return 0.0
        var = (self.answer_tokens_sq - self.answers * self.mean**2) / (self.answers - 1)
        return math.sqrt(max(var, 0.0))

    @property
    def skewness(self) -> float:
        """The accepted answers' sample skewness (adjusted Fisher-Pearson G1; 0 below three answers or
        without spread): answer lengths are right-skewed (a few long answers), which moves the
        interval of their mean up (plan/calibrate.py)."""
        n, mean = self.answers, self.mean
        if n < 3:
            return 0.0
        m2 = self.answer_tokens_sq / n - mean * mean
        if m2 <= 1e-9 * max(mean * mean, 1.0):
            return 0.0
        m3 = self.answer_tokens_cu / n - 3 * mean * self.answer_tokens_sq / n + 2 * mean ** 3
        return m3 / (m2 * math.sqrt(m2)) * math.sqrt(n * (n - 1)) / (n - 2)

    @property
    def tokens_per_request(self) -> float:
        """Output tokens billed per request: re-asked and rejected attempts included."""
        return self.attempt_tokens / self.requests if self.requests else 0.0

    @property
    def attempts_per_request(self) -> float:
        return self.attempts / self.requests if self.requests else 1.0

    def __add__(self, other: OutputStats) -> OutputStats:
        return OutputStats(self.answers + other.answers, self.attempts + other.attempts,
                           self.answer_tokens + other.answer_tokens, self.answer_tokens_sq + other.answer_tokens_sq,
                           self.attempt_tokens + other.attempt_tokens, max(self.max_tokens, other.max_tokens),
                           self.requests + other.requests, self.answer_tokens_cu + other.answer_tokens_cu)


@dataclass(frozen=True)
class KeyStats:
    """A length key's statistics per run kind (`apply`, `pilot`)."""

    by_kind: dict[str, OutputStats] = field(default_factory=dict)

    @property
    def total(self) -> OutputStats:
        return sum(self.by_kind.values(), OutputStats())


@dataclass(frozen=True)
class InputCalibration:
    """Provider-reported input tokens against the plan's count, over first attempts of one model."""

    answers: int = 0
    counted: int = 0
    reported: int = 0
    max_ratio: float = 0.0
    ratio_sum: float = 0.0  # sum of each answer's reported / counted, and of its square: their spread
    ratio_sq: float = 0.0

    @property
    def ratio(self) -> float:
        return self.reported / self.counted if self.counted else 1.0

    @property
    def spread(self) -> float:
        """Standard deviation of the answers' own reported / counted ratios (0 below two answers)."""
        if self.answers < 2:
            return 0.0
        squares = self.ratio_sq - self.ratio_sum * self.ratio_sum / self.answers
        return math.sqrt(max(0.0, squares / (self.answers - 1)))


def record_run_steps(store: Any, run_id: str, estimates: list[StepEstimate], kind: str = "apply") -> None:
    """Store a run's per-step estimate (once per run: workers joining a shared run add nothing)."""
    if not estimates:
        return
    columns = ("run_id", "kind", *_ESTIMATE_COLUMNS)
    marks = "(" + ", ".join("?" * len(columns)) + ")"
    values = [v for e in estimates for v in (run_id, kind, *(getattr(e, c) for c in _ESTIMATE_COLUMNS))]
    store.execute(f"INSERT INTO run_steps ({', '.join(columns)}) VALUES {', '.join([marks] * len(estimates))} "
                  "ON CONFLICT DO NOTHING", values)


def tag_run_kind(store: Any, run_id: str, kind: str) -> None:
    """Mark every answer of a run as `kind` answers (a pilot's answers read `pilot: N answers`)."""
    store.execute("UPDATE run_steps SET kind = ? WHERE run_id = ?", [kind, run_id])


def output_stats(store: Any, length_keys: list[str]) -> dict[str, KeyStats]:
    """Per length key: billed attempts and accepted answers' output tokens, per run kind."""
    found: dict[str, dict[str, OutputStats]] = {key: {} for key in length_keys}
    rows = _billed_by_step(store, "s.length_key, coalesce(s.kind, 'apply')", "s.length_key", length_keys,
                           "count(*) FILTER (WHERE a.outcome = 'ok'), count(*), "
                           "coalesce(sum(a.output_tokens) FILTER (WHERE a.outcome = 'ok'), 0), "
                           f"coalesce(sum({_TOKENS} * {_TOKENS}) FILTER (WHERE a.outcome = 'ok'), 0), "
                           "coalesce(sum(a.output_tokens), 0), coalesce(max(a.output_tokens), 0), "
                           "count(DISTINCT a.run_id || ':' || a.request_key), "
                           f"coalesce(sum({_TOKENS} * {_TOKENS} * {_TOKENS}) FILTER (WHERE a.outcome = 'ok'), 0)")
    for key, kind, answers, attempts, tokens, squares, attempt_tokens, most, requests, cubes in rows:
        found[key][kind] = OutputStats(int(answers), int(attempts), int(tokens), float(squares),
                                       int(attempt_tokens), int(most), int(requests), float(cubes))
    return {key: KeyStats(kinds) for key, kinds in found.items()}


def input_calibration(store: Any, models: list[str]) -> dict[str, InputCalibration]:
    """Per `provider:model`: what the provider reported as input tokens against the plan's count."""
    rows = _billed_by_step(store, "s.model", "s.model", models,
                           "count(*), sum(a.counted_input_tokens), sum(a.input_tokens), "
                           "max(a.input_tokens * 1.0 / a.counted_input_tokens), "
                           "sum(a.input_tokens * 1.0 / a.counted_input_tokens), "
                           "sum((a.input_tokens * 1.0 / a.counted_input_tokens) * (a.input_tokens * 1.0 / "
                           "a.counted_input_tokens))",
                           "a.counted_input_tokens > 0 AND a.input_tokens > 0")
    found = {model: InputCalibration() for model in models}
    for model, n, counted, reported, most, ratios, squares in rows:
        found[model] = InputCalibration(int(n), int(counted), int(reported), float(most), float(ratios or 0.0),
                                        float(squares or 0.0))
    return found


def _billed_by_step(store: Any, group: str, column: str, values: list[str], aggregates: str,
                   where: str = "true") -> list[tuple[Any, ...]]:
    """`aggregates` over the billed attempts of run steps whose `column` is one of `values`."""
    if not values:
        return []
    marks = ", ".join("?" * len(values))
    rows: list[tuple[Any, ...]] = store.execute(
        f"SELECT {group}, {aggregates} FROM run_steps s JOIN attempts a ON a.run_id = s.run_id AND a.step = s.step "
        f"WHERE {column} IN ({marks}) AND {where} AND {_BILLED} GROUP BY {group}", list(values))
    return rows


WHEN_ROWS = 50_000
"""Rows of earlier jobs a `when:` share is read from at most: a share's binomial error at that many
is below 0.3 %, and reading every row of a 10M-row history would slow every plan by seconds."""


def when_share(store: Any, when_key: str, upstream: list[str]) -> tuple[int, int]:
    """(rows run, rows evaluated) of earlier jobs' steps with this `when_key` (up to WHEN_ROWS of
    their rows): rows whose upstream answers all exist, where the step sent a request (the
    condition held) or none (it did not). A row drawn by several jobs (a pilot, its top-up, the
    full run) counts once."""
    if not upstream:
        return 0, 0
    joins = " ".join(f"JOIN job_requests u{i} ON u{i}.job_id = j.job_id AND u{i}.row_key = j.row_key "
                     f"AND u{i}.step = ? JOIN results r{i} ON r{i}.request_key = u{i}.request_key "
                     f"AND r{i}.status = 'succeeded'" for i in range(len(upstream)))
    keys = ", ".join(f"u{i}.request_key" for i in range(len(upstream)))
    rows = store.execute(
        "SELECT count(*) FILTER (WHERE ran), count(*) FROM (SELECT DISTINCT j.row_key, "
        f"{keys}, j.request_key IS NOT NULL AS ran FROM (SELECT q.* FROM job_requests q JOIN (SELECT DISTINCT "
        "r.job_id, s.step FROM run_steps s JOIN runs r ON r.run_id = s.run_id WHERE s.when_key = ?) k "
        f"ON q.job_id = k.job_id AND q.step = k.step LIMIT {WHEN_ROWS}) j {joins}) t", [when_key, *upstream])
    ran, evaluated = rows[0] if rows else (0, 0)
    return int(ran or 0), int(evaluated or 0)


def stored_answers(store: Any, length_key: str, limit: int = 32) -> list[str]:
    """Up to `limit` accepted answers (their stored output) of earlier runs' steps with this length key."""
    rows = store.execute("SELECT r.output FROM (SELECT DISTINCT a.request_key FROM run_steps s JOIN attempts a "
                         "ON a.run_id = s.run_id AND a.step = s.step WHERE s.length_key = ? AND a.outcome = 'ok' "
                         f"LIMIT {int(limit)}) k JOIN results r ON r.request_key = k.request_key "
                         "WHERE r.status = 'succeeded'", [length_key])
    return [str(output) for (output,) in rows if output is not None]


def run_step_report(store: Any, run_id: str) -> list[dict[str, Any]]:
    """Per step of a run: the plan's estimate, what its attempts cost, and actual / expected.

    The ratio compares like with like: a run that had only part of its requests answered or billed (interrupted,
    stopped by its budget, a pilot cut by its allowance) is held to the plan's expected cost of
    that part (`settled_expected_usd`), not of the whole plan, which read as an estimate 5x too high."""
    estimates = store.execute(f"SELECT {', '.join(_ESTIMATE_COLUMNS)}, kind FROM run_steps WHERE run_id = ? "
                              "ORDER BY step", [run_id])
    rows = store.execute("SELECT step, coalesce(sum(cost_usd), 0), coalesce(sum(input_tokens), 0), "
                         "coalesce(sum(output_tokens), 0), count(DISTINCT request_key) FILTER "
                         "(WHERE outcome = 'ok' OR coalesce(cost_usd, 0) > 0) FROM attempts "
                         "WHERE run_id = ? GROUP BY step", [run_id])
    spent = {step: (float(cost), int(tokens_in), int(tokens_out), int(keys))
             for step, cost, tokens_in, tokens_out, keys in rows}
    report = []
    for row in estimates:
        entry = dict(zip((*_ESTIMATE_COLUMNS, "kind"), row))
        cost, tokens_in, tokens_out, sent = spent.get(entry["step"], (0.0, 0, 0, 0))
        planned = int(entry["requests"] or 0)
        done = min(sent, planned)  # requests answered or billed (a row cut while it was re-asked counts)
        expected = float(entry["expected_usd"] or 0.0)
        part = expected * done / planned if planned else expected
        entry.update(actual_usd=cost, actual_input_tokens=tokens_in, actual_output_tokens=tokens_out,
                     settled_requests=done, settled_expected_usd=part, ratio=cost / part if part > 0 else None)
        report.append(entry)
    return report


def report_totals(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """A run's steps together: expected and at most (whole plan), spent, and actual / expected of
    the part it settled (see run_step_report)."""
    expected = sum(float(s["expected_usd"] or 0.0) for s in steps)
    part = sum(float(s.get("settled_expected_usd", s["expected_usd"]) or 0.0) for s in steps)
    actual = sum(float(s["actual_usd"]) for s in steps)
    return {"expected_usd": expected, "upper_usd": sum(float(s["upper_usd"] or 0.0) for s in steps),
            "actual_usd": actual, "settled_expected_usd": part, "ratio": actual / part if part > 0 else None,
            "requests": sum(int(s["requests"] or 0) for s in steps),
            "settled_requests": sum(int(s.get("settled_requests", s["requests"]) or 0) for s in steps)}
