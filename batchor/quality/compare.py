"""`batchor diff A B`: how two versions of a job answered the same rows, without a call.

Both sides are loaded into one DuckDB as answers tables and joined on `_row_key`, so a pilot
(`--sample 50`) of each prompt version compares row for row. Per step common to both: rows
compared (answered on both sides), answers changed, agreement per field (a confusion matrix for
enum fields), golden-label metric deltas when the specs give `expected:`, what the answers cost on
each side, and a sample of changed rows side by side.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclass_field  # a dataclass below has a field named `field`
from typing import Any

from batchor.duck import duckdb
from batchor.plan.model import StepPlan
from batchor.quality.answers import (
    Shape,
    answer_fields,
    connect,
    field_kind,
    field_sql,
    load_answers,
    ok_column,
    q,
)
from batchor.quality.metrics import FieldMetrics, golden_metrics
from batchor.quality.sources import Source

EXAMPLES = 5


@dataclass
class FieldAgreement:
    field: str
    kind: str
    agree: int
    compared: int
    confusion: list[tuple[str, str, int]] = dataclass_field(default_factory=list)  # enums: (A value, B value, rows)

    @property
    def share(self) -> float | None:
        return self.agree / self.compared if self.compared else None


@dataclass
class StepDiff:
    step: str
    rows_a: int  # rows the step answered in A
    rows_b: int
    compared: int  # rows answered on both sides
    changed: int
    fields: list[FieldAgreement] = dataclass_field(default_factory=list)
    # (field.metric, A, B)
    metrics: list[tuple[str, float | None, float | None]] = dataclass_field(default_factory=list)
    cost_a: float = 0.0  # what this step's answers cost (each distinct request once)
    cost_b: float = 0.0
    examples: list[dict[str, Any]] = dataclass_field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "rows_a": self.rows_a,
            "rows_b": self.rows_b,
            "compared": self.compared,
            "changed": self.changed,
            "cost_a": self.cost_a,
            "cost_b": self.cost_b,
            "fields": [
                {
                    "field": f.field,
                    "kind": f.kind,
                    "agree": f.agree,
                    "compared": f.compared,
                    "agreement": f.share,
                    "confusion": [{"a": a, "b": b, "rows": n} for a, b, n in f.confusion],
                }
                for f in self.fields
            ],
            "metrics": [
                {"metric": m, "a": a, "b": b, "delta": None if a is None or b is None else b - a}
                for m, a, b in self.metrics
            ],
            "examples": self.examples,
        }


@dataclass
class DiffReport:
    a: str
    b: str
    run_a: str | None
    run_b: str | None
    steps: list[StepDiff]
    only_a: list[str]  # steps only A has
    only_b: list[str]

    @property
    def cost_a(self) -> float:
        return sum(s.cost_a for s in self.steps)

    @property
    def cost_b(self) -> float:
        return sum(s.cost_b for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "run_a": self.run_a,
            "run_b": self.run_b,
            "cost_a": self.cost_a,
            "cost_b": self.cost_b,
            "cost_delta": self.cost_b - self.cost_a,
            "only_a": self.only_a,
            "only_b": self.only_b,
            "steps": [s.to_dict() for s in self.steps],
        }

    def __str__(self) -> str:
        from batchor.quality.diff_render import diff_text

        return diff_text(self)


def diff_sources(a: Source, b: Source, examples: int = EXAMPLES) -> DiffReport:
    """Compare the stored answers of two sources step by step (see module doc)."""
    db = connect(a.plan, b.plan)
    try:
        load_answers(db, a.plan, a.store, "a")
        load_answers(db, b.plan, b.store, "b")
        metrics_a = {m.name: m for m in golden_metrics(db, Shape.of(a.plan), a.spec, "a")}
        metrics_b = {m.name: m for m in golden_metrics(db, Shape.of(b.plan), b.spec, "b")}
        costs_a, costs_b = step_costs(a), step_costs(b)
        names_b = {s.name for s in b.plan.header.steps}
        steps = []
        for step_a in a.plan.header.steps:
            if step_a.name in names_b:
                step_b = b.plan.header.step(step_a.name)
                diff = _step_diff(db, step_a, step_b, examples)
                diff.metrics = _metric_deltas(step_a.name, metrics_a, metrics_b)
                diff.cost_a, diff.cost_b = costs_a.get(step_a.name, 0.0), costs_b.get(step_a.name, 0.0)
                steps.append(diff)
    finally:
        db.close()
    names_a = {s.name for s in a.plan.header.steps}
    return DiffReport(
        a.label,
        b.label,
        a.run.run_id if a.run else None,
        b.run.run_id if b.run else None,
        steps,
        sorted(names_a - names_b),
        sorted(names_b - names_a),
    )


def _step_diff(db: duckdb.DuckDBPyConnection, step_a: StepPlan, step_b: StepPlan, examples: int) -> StepDiff:
    ok_a, ok_b = f"a.{q(ok_column(step_a.name))}", f"b.{q(ok_column(step_b.name))}"
    joined = f"FROM a JOIN b USING (_row_key) WHERE {ok_a} AND {ok_b}"
    whole_a, whole_b = _json(f"a.{q(step_a.name)}"), _json(f"b.{q(step_b.name)}")
    counts = db.execute(f"SELECT count(*), count(*) FILTER (WHERE {whole_a} IS DISTINCT FROM {whole_b}) {joined}")
    compared, changed = counts.fetchone() or (0, 0)
    rows_a = db.execute(f"SELECT count(*) FROM a WHERE {ok_a}").fetchone()[0]
    rows_b = db.execute(f"SELECT count(*) FROM b WHERE {ok_b}").fetchone()[0]
    diff = StepDiff(step_a.name, int(rows_a), int(rows_b), int(compared), int(changed))
    common = [f for f in answer_fields(step_a) if f in answer_fields(step_b)]
    diff.fields = [_agreement(db, joined, step_a, step_b, name) for name in common]
    sample = db.execute(
        f"SELECT _row_key, {whole_a}, {whole_b} {joined} AND {whole_a} IS DISTINCT FROM {whole_b} "
        f"ORDER BY _row_key LIMIT {int(examples)}"
    ).fetchall()
    diff.examples = [{"_row_key": key, "a": value_a, "b": value_b} for key, value_a, value_b in sample]
    return diff


def _json(sql: str) -> str:
    return f"CAST(to_json({sql}) AS VARCHAR)"


def _agreement(
    db: duckdb.DuckDBPyConnection, joined: str, step_a: StepPlan, step_b: StepPlan, name: str
) -> FieldAgreement:
    value_a, value_b = _json(field_sql(step_a, name, "a")), _json(field_sql(step_b, name, "b"))
    agree, compared = db.execute(
        f"SELECT count(*) FILTER (WHERE {value_a} IS NOT DISTINCT FROM {value_b}), count(*) {joined}"
    ).fetchone() or (0, 0)
    kind = field_kind(step_a, name)
    result = FieldAgreement(name, kind, int(agree), int(compared))
    if kind == "enum":
        plain_a = f"CAST({field_sql(step_a, name, 'a')} AS VARCHAR)"
        plain_b = f"CAST({field_sql(step_b, name, 'b')} AS VARCHAR)"
        rows = db.execute(
            f"SELECT coalesce({plain_a}, ''), coalesce({plain_b}, ''), count(*) {joined} GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        result.confusion = [(str(x), str(y), int(n)) for x, y, n in rows]
    return result


def _metric_deltas(
    step: str, side_a: dict[str, FieldMetrics], side_b: dict[str, FieldMetrics]
) -> list[tuple[str, float | None, float | None]]:
    deltas = []
    for name in sorted(set(side_a) | set(side_b)):
        if not name.startswith(step + "."):
            continue
        values_a = side_a[name].values if name in side_a else {}
        values_b = side_b[name].values if name in side_b else {}
        for metric in [m for m in dict.fromkeys([*values_a, *values_b]) if "." not in m]:
            deltas.append((f"{name.split('.', 1)[1]}.{metric}", values_a.get(metric), values_b.get(metric)))
    return deltas


def step_costs(source: Source) -> dict[str, float]:
    """What each step's answers cost: every distinct request of the job counted once."""
    return source.store.step_costs(source.plan.job_id)
