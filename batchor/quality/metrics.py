"""Golden labels: how well a step's answers match known answers in an input column (`expected:`).

The metric follows the field's type: accuracy, per-class precision/recall/F1 and a confusion
matrix for enums (and booleans), exact and normalised match for strings, mean absolute error for
numbers, set precision/recall/F1 for arrays (a label cell holds a JSON list or `a; b; c`). Rows
whose label cell is empty are left out, and so are rows the step did not answer (counted apart).
Everything is aggregated by DuckDB over the answers table; only the confusion matrix comes back.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclass_field  # a dataclass below has a field named `field`
from typing import Any

from batchor.duck import duckdb
from batchor.errors import SpecError
from batchor.quality.answers import Shape, answer_fields, field_kind, field_sql, ok_column, q
from batchor.spec.model import JobSpec, LLMStep

_NORM = "lower(trim(regexp_replace(CAST({} AS VARCHAR), '\\s+', ' ', 'g')))"
_LIST = "list_filter(list_distinct(list_transform({}, lambda e: lower(trim(CAST(e AS VARCHAR))))), lambda e: e <> '')"


@dataclass
class FieldMetrics:
    """The metrics of one answer field against its golden-label column."""

    step: str
    field: str
    column: str
    kind: str  # enum | string | text | number | array
    labelled: int  # rows with a label and an answer: the metric's denominator
    unanswered: int  # rows with a label the step did not answer (not counted)
    values: dict[str, float] = dataclass_field(default_factory=dict)
    confusion: list[tuple[str, str, int]] = dataclass_field(default_factory=list)  # enums: (expected, answered, rows)

    @property
    def name(self) -> str:
        return f"{self.step}.{self.field}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "field": self.name,
            "column": self.column,
            "kind": self.kind,
            "labelled": self.labelled,
            "unanswered": self.unanswered,
            "metrics": self.values,
            "confusion": [{"expected": e, "answered": a, "rows": n} for e, a, n in self.confusion],
        }


def golden_metrics(
    db: duckdb.DuckDBPyConnection, shape: Shape, spec: JobSpec, table: str = "answers"
) -> list[FieldMetrics]:
    """Metrics for every `expected:` mapping of the spec's steps that the plan has."""
    found = []
    reviewed = reviewed_fields(db, table)
    for name, step_spec in spec.steps.items():
        if not isinstance(step_spec, LLMStep) or not step_spec.expected:
            continue
        step = _plan_step(shape, name)
        for answer_field, column in step_spec.expected.items():
            check_expected(shape, name, answer_field, column)
            found.append(field_metrics(db, table, step, answer_field, column, reviewed.pop((name, answer_field), None)))
    for (name, answer_field), labels in sorted(reviewed.items()):  # reviewed fields without an `expected:`
        step = shape.step(name)
        if step is not None and answer_field in answer_fields(step):
            found.append(field_metrics(db, table, step, answer_field, None, labels))
    return found


def reviewed_fields(db: duckdb.DuckDBPyConnection, table: str) -> dict[tuple[str, str], str]:
    """(step, field) -> the answers table's column of reviewed labels (quality/answers.py)."""
    names = [row[0] for row in db.execute(f"DESCRIBE {q(table)}").fetchall()]
    found = {}
    for name in names:
        if name.startswith("_review."):
            step, _, field = name.removeprefix("_review.").rpartition(".")
            found[(step, field)] = name
    return found


def check_expected(shape: Shape, step_name: str, answer_field: str, column: str) -> None:
    """Fail with a clear message when a golden-label mapping names a missing field or column."""
    step = _plan_step(shape, step_name)
    where = f"steps.{step_name}.expected.{answer_field}"
    if answer_field not in answer_fields(step):
        raise SpecError(
            f"{where}: the step's answers have no field '{answer_field}' (fields: {', '.join(answer_fields(step))})",
            hint="map an answer field (`text` for a text step) to an input column",
        )
    if column not in shape.columns:
        raise SpecError(
            f"{where}: input column '{column}' not found (columns: {', '.join(shape.columns)})",
            hint="name the input column that holds the known answers",
        )


def _plan_step(shape: Shape, name: str) -> Any:
    step = shape.step(name)
    if step is None:
        raise SpecError(
            f"step '{name}' is not in the plan of this run", hint="check the spec against the run (`batchor runs`)"
        )
    return step


def field_metrics(
    db: duckdb.DuckDBPyConnection,
    table: str,
    step: Any,
    answer_field: str,
    column: str | None,
    reviewed: str | None = None,
) -> FieldMetrics:
    """One field's metrics against its labels: the input `column`, a person's reviewed label
    (column `reviewed`) taking precedence where there is one."""
    kind = field_kind(step, answer_field)
    answer = field_sql(step, answer_field)
    sources = [q(c) for c in (reviewed, column) if c is not None]
    label = f"coalesce({', '.join(f'CAST({s} AS VARCHAR)' for s in sources)})" if reviewed else q(column or "")
    column = " + ".join(filter(None, [column, "reviewed labels" if reviewed else None]))
    has_label = f"{label} IS NOT NULL AND trim(CAST({label} AS VARCHAR)) <> ''"
    base = f"FROM {q(table)} WHERE {has_label} AND {q(ok_column(step.name))}"
    (unanswered,) = db.execute(
        f"SELECT count(*) FROM {q(table)} WHERE {has_label} AND NOT {q(ok_column(step.name))}"
    ).fetchone() or (0,)
    result = FieldMetrics(step.name, answer_field, column, kind, 0, int(unanswered))
    if kind == "enum":
        _enum_metrics(db, base, answer, label, result)
    elif kind == "number":
        row = db.execute(
            f"SELECT count(*), avg(abs({answer} - TRY_CAST({label} AS DOUBLE))) {base} "
            f"AND TRY_CAST({label} AS DOUBLE) IS NOT NULL"
        ).fetchone()
        result.labelled, result.values = int(row[0]), _present({"mae": row[1]})
    elif kind == "array":
        _set_metrics(db, base, answer, label, result)
    else:
        norm_a, norm_l = _NORM.format(answer), _NORM.format(label)
        row = db.execute(
            f"SELECT count(*), avg((CAST({answer} AS VARCHAR) = CAST({label} AS VARCHAR))::INT), "
            f"avg(({norm_a} = {norm_l})::INT) {base}"
        ).fetchone()
        result.labelled, result.values = int(row[0]), _present({"exact": row[1], "normalized": row[2]})
    return result


def _enum_metrics(db: duckdb.DuckDBPyConnection, base: str, answer: str, label: str, result: FieldMetrics) -> None:
    norm_a, norm_l = _NORM.format(answer), _NORM.format(label)
    rows = db.execute(f"SELECT {norm_l}, coalesce({norm_a}, ''), count(*) {base} GROUP BY ALL ORDER BY ALL").fetchall()
    result.confusion = [(str(e), str(a), int(n)) for e, a, n in rows]
    result.labelled = sum(n for _, _, n in result.confusion)
    if not result.labelled:
        return
    correct = sum(n for e, a, n in result.confusion if e == a)
    values = {"accuracy": correct / result.labelled}
    classes = sorted({e for e, _, _ in result.confusion} | {a for _, a, _ in result.confusion} - {""})
    f1s = []
    for cls in classes:
        tp = sum(n for e, a, n in result.confusion if e == a == cls)
        predicted = sum(n for _, a, n in result.confusion if a == cls)
        actual = sum(n for e, _, n in result.confusion if e == cls)
        precision, recall = _ratio(tp, predicted), _ratio(tp, actual)
        f1 = _f1(precision, recall)
        values |= {f"precision.{cls}": precision, f"recall.{cls}": recall, f"f1.{cls}": f1}
        f1s.append(f1)
    values["macro_f1"] = sum(f1s) / len(f1s) if f1s else 0.0
    result.values = values


def _set_metrics(db: duckdb.DuckDBPyConnection, base: str, answer: str, label: str, result: FieldMetrics) -> None:
    labels = (
        f"CASE WHEN starts_with(trim(CAST({label} AS VARCHAR)), '[') "
        f"THEN json_transform(CAST({label} AS VARCHAR), '[\"VARCHAR\"]') "
        f"ELSE string_split(CAST({label} AS VARCHAR), ';') END"
    )
    got, want = _LIST.format(f"coalesce({answer}, [])"), _LIST.format(labels)
    row = db.execute(
        f"SELECT count(*), sum(len(list_intersect({got}, {want}))), sum(len({got})), sum(len({want})) {base}"
    ).fetchone()
    result.labelled = int(row[0])
    if not result.labelled:
        return
    hits, answered, expected = (int(v or 0) for v in row[1:])
    precision, recall = _ratio(hits, answered), _ratio(hits, expected)
    result.values = {"precision": precision, "recall": recall, "f1": _f1(precision, recall)}


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def _present(values: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in values.items() if v is not None}
