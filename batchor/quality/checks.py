"""Quality gates (`checks:`): assertions over the stored answers, run after apply and by `batchor check`.

Row checks say what must hold for each row: a DuckDB SQL expression (`sql:`, evaluated by DuckDB
over the whole table, so millions of rows stay cheap) or a sandboxed Jinja expression (`row:`,
the names templates use). Aggregate checks bound one figure: the largest share of one value
(`distribution:` + `max_share`), a SQL aggregate (`aggregate:`) or a golden-label metric
(`metric:`). A check on a step sees the rows that step answered; a job check sees the rows whose
`_status` is succeeded. A check that sees no row fails: a gate over nothing proves nothing.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jinja2
import pyarrow as pa
from jinja2 import meta

from batchor.duck import duckdb, shared_cursor
from batchor.errors import Problems, SpecError
from batchor.plan.model import StepPlan
from batchor.plan.plan_file import CompiledPlan
from batchor.quality.answers import (
    Shape,
    add_input_columns,
    answer_fields,
    connect,
    empty_answers,
    load_answers,
    ok_column,
    q,
)
from batchor.quality.metrics import FieldMetrics, golden_metrics
from batchor.quality.sources import Source
from batchor.spec.model import CheckSpec, JobSpec, LLMStep
from batchor.spec.sql_guard import refused_access
from batchor.spec.templates import make_environment
from batchor.state.base import StateStore

Locate = Callable[..., str]  # key path -> `file:line` in the spec (LoadedSpec.where)
EXAMPLES = 3
_JINJA_BATCH = 10_000
_METRIC_NAMES = {
    "enum": ("accuracy", "macro_f1", "precision", "recall", "f1"),
    "string": ("exact", "normalized"),
    "text": ("exact", "normalized"),
    "number": ("mae",),
    "array": ("precision", "recall", "f1"),
}


@dataclass
class CheckOutcome:
    """The verdict of one check, with the counts and rows that back it."""

    name: str
    scope: str  # a step name, or "job"
    kind: str  # row | sql | distribution | aggregate | metric
    passed: bool
    rows: int  # rows the check looked at
    failing: int = 0  # row checks: rows where the expression was not true
    value: float | None = None  # share passing, largest share, aggregate or metric value
    threshold: str = ""
    detail: str = ""
    examples: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "scope": self.scope,
            "kind": self.kind,
            "passed": self.passed,
            "rows": self.rows,
            "failing": self.failing,
            "value": self.value,
            "threshold": self.threshold,
            "detail": self.detail,
            "examples": self.examples,
        }


@dataclass
class CheckReport:
    """All checks and golden-label metrics of one run; `passed` is what CI gates on."""

    source: str
    run_id: str | None
    checks: list[CheckOutcome]
    metrics: list[FieldMetrics]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failed(self) -> list[CheckOutcome]:
        return [c for c in self.checks if not c.passed]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "run_id": self.run_id,
            "passed": self.passed,
            "checks": [c.to_dict() for c in self.checks],
            "metrics": [m.to_dict() for m in self.metrics],
        }

    def __str__(self) -> str:
        from batchor.quality.render import checks_text

        return checks_text(self)


def has_quality(spec: JobSpec) -> bool:
    """Whether the spec asks for any check or golden-label metric."""
    return bool(spec.checks) or any(isinstance(s, LLMStep) and (s.checks or s.expected) for s in spec.steps.values())


def check_source(source: Source) -> CheckReport:
    run_id = source.run.run_id if source.run else None
    return evaluate(source.plan, source.store, source.spec, source.label, run_id, source.added)


def preflight(plan: CompiledPlan, spec: JobSpec) -> None:
    """Bind every check and golden label against the plan's columns and steps before any call, so
    a typo is a spec error up front, not after the run has been paid for."""
    if not has_quality(spec):
        return
    db = connect(plan)
    try:
        load_answers(db, plan, None)
        _bind_all(db, Shape.of(plan), spec, None)
    finally:
        db.close()


def bind_checks(spec: JobSpec, inputs: pa.Schema, steps: list[StepPlan], locate: Locate | None = None) -> None:
    """`validate`'s preflight, before any plan exists: every check and golden label bound against
    an empty answers table typed from the input's columns and the steps' output schemas. Checks of
    a step that could not be resolved wait (its own problem is reported)."""
    if not has_quality(spec):
        return
    db = shared_cursor()
    try:
        empty_answers(db, inputs, steps)
        _bind_all(db, Shape(list(inputs.names), steps), spec, locate)
    finally:
        db.close()


def _bind_all(db: duckdb.DuckDBPyConnection, shape: Shape, spec: JobSpec, locate: Locate | None) -> None:
    """Each check evaluated over `answers` (empty: binding is what fails); raises every problem."""
    found = Problems()
    metrics: list[FieldMetrics] | None = None
    with found.check():
        metrics = golden_metrics(db, shape, spec)
    for path, scope, check in _all_checks(spec, shape, partial=locate is not None):
        if check.metric is not None and metrics is None:
            continue  # its golden labels are the problem already reported
        with found.check():
            try:
                _evaluate(db, shape, scope, check, metrics or [])
            except SpecError as exc:
                where = f"{locate(*path)}: " if locate else ""
                raise type(exc)(where + exc.message, hint=exc.hint) from None
    found.raise_all()


def evaluate(
    plan: CompiledPlan,
    store: StateStore | None,
    spec: JobSpec,
    label: str,
    run_id: str | None,
    added: pa.Table | None = None,
) -> CheckReport:
    """Run every check and metric of `spec` over the stored answers of `plan`'s job (no calls);
    `added`: input columns read since the run (a golden-label column), joined by row key."""
    db = connect(plan)
    shape = Shape.of(plan)
    try:
        load_answers(db, plan, store)
        if added is not None:
            add_input_columns(db, added)
            shape = Shape(shape.columns + added.column_names[1:], shape.steps)
        metrics = golden_metrics(db, shape, spec)
        outcomes = [_evaluate(db, shape, scope, check, metrics) for _, scope, check in _all_checks(spec, shape)]
    finally:
        db.close()
    return CheckReport(label, run_id, outcomes, metrics)


def _all_checks(spec: JobSpec, shape: Shape, partial: bool = False) -> list[tuple[tuple[Any, ...], str, CheckSpec]]:
    """(key path, scope, check) of every check; `partial`: only those whose steps all resolved."""
    steps = {s.name for s in shape.steps}
    complete = steps >= set(spec.steps)
    found = [(("checks", i), "job", check) for i, check in enumerate(spec.checks) if complete or not partial]
    for name, step in spec.steps.items():
        if isinstance(step, LLMStep) and step.checks:
            if name not in steps:
                if partial:
                    continue
                raise SpecError(f"steps.{name}.checks: step '{name}' is not in the plan of this run")
            found += [(("steps", name, "checks", i), name, check) for i, check in enumerate(step.checks)]
    return found


def _evaluate(
    db: duckdb.DuckDBPyConnection, shape: Shape, scope: str, check: CheckSpec, metrics: list[FieldMetrics]
) -> CheckOutcome:
    where = q(ok_column(scope)) if scope != "job" else "_status = 'succeeded'"
    steps = [s.name for s in shape.steps]
    try:
        if check.sql is not None:
            return _sql_rows(db, scope, check, where, steps)
        if check.row is not None:
            return _jinja_rows(db, shape.columns, scope, check, where, steps)
        if check.distribution is not None:
            return _distribution(db, scope, check, where)
        if check.aggregate is not None:
            (value,), rows = (
                db.execute(f"SELECT ({check.aggregate}) FROM answers WHERE {where}").fetchone(),
                _count(db, where),
            )
            return _bounded(check, scope, "aggregate", None if value is None else float(value), rows)
    except duckdb.Error as exc:
        refused = refused_access(exc, f"{_where(scope)}: check '{_name(check)}'", None)
        if refused:
            raise refused from None
        message = str(exc).splitlines()[0][:300]
        raise SpecError(
            f"{_where(scope)}: check '{_name(check)}': {message}{_did_you_mean(message, shape)}",
            hint="checks read the answers: input columns, one column per step "
            "(`classify.sentiment`), `_row_key`, `_status`",
        ) from None
    return _metric(scope, check, metrics)


def _did_you_mean(message: str, shape: Shape) -> str:
    """' (did you mean `triage.summary`?)' for the name DuckDB could not find."""
    quoted = re.search(r'"([^"]+)"', message)
    if quoted is None:
        return ""
    names = [*shape.columns, "_row_key", "_status"]
    for step in shape.steps:
        names += [step.name] + [f"{step.name}.{field}" for field in answer_fields(step) if step.schema is not None]
    by_last = {name.rsplit(".", 1)[-1]: name for name in reversed(names)}
    close = difflib.get_close_matches(quoted.group(1), list(by_last), n=2, cutoff=0.6)
    return f" (did you mean {' or '.join(f'`{by_last[c]}`' for c in close)}?)" if close else ""


def _count(db: duckdb.DuckDBPyConnection, where: str) -> int:
    return int(db.execute(f"SELECT count(*) FROM answers WHERE {where}").fetchone()[0])


def _sql_rows(
    db: duckdb.DuckDBPyConnection, scope: str, check: CheckSpec, where: str, steps: list[str]
) -> CheckOutcome:
    failing = f"NOT coalesce(CAST(({check.sql}) AS BOOLEAN), false)"
    rows, bad = db.execute(f"SELECT count(*), count(*) FILTER (WHERE {failing}) FROM answers WHERE {where}").fetchone()
    shown = _shown_columns(check.sql or "", scope, steps)
    examples = db.execute(f"SELECT _row_key, {shown} FROM answers WHERE {where} AND {failing} LIMIT {EXAMPLES}")
    names = [d[0] for d in examples.description]
    return _row_outcome(check, scope, "sql", int(rows), int(bad), [dict(zip(names, r)) for r in examples.fetchall()])


def _shown_columns(expression: str, scope: str, steps: list[str]) -> str:
    """The step answers an expression names (and the check's own step), shown with failing rows."""
    named = [s for s in steps if s == scope or re.search(rf"\b{re.escape(s)}\b", expression)]
    return ", ".join(q(s) for s in named) or "_status"


def _jinja_rows(
    db: duckdb.DuckDBPyConnection, inputs: list[str], scope: str, check: CheckSpec, where: str, steps: list[str]
) -> CheckOutcome:
    expression = _compile_expression(check, scope, set(steps))
    rows = bad = 0
    examples: list[dict[str, Any]] = []
    reader = db.sql(f"SELECT * FROM answers WHERE {where}").to_arrow_reader(_JINJA_BATCH)
    for batch in reader:
        for record in batch.to_pylist():
            context = {"row": {c: record[c] for c in inputs}, **{s: record[s] for s in steps}}
            rows += 1
            ok, error = _truthy(expression, context)
            if not ok:
                bad += 1
                if len(examples) < EXAMPLES:
                    shown = {s: record[s] for s in steps if s == scope or s in (check.row or "")}
                    examples.append({"_row_key": record["_row_key"], **shown, **({"error": error} if error else {})})
    return _row_outcome(check, scope, "row", rows, bad, examples)


def _compile_expression(check: CheckSpec, scope: str, steps: set[str]) -> Any:
    env = make_environment()
    try:
        names = meta.find_undeclared_variables(env.parse("{{ " + (check.row or "") + " }}"))
        compiled = env.compile_expression(check.row or "")
    except jinja2.TemplateSyntaxError as exc:
        raise SpecError(f"{_where(scope)}: check '{_name(check)}': Jinja syntax error: {exc.message}") from None
    unknown = sorted(names - steps - {"row", "range", "dict", "len"})
    if unknown:
        raise SpecError(
            f"{_where(scope)}: check '{_name(check)}' uses {', '.join(unknown)}, which is neither `row` nor a step",
            hint="use row.<column> or <step>.<field>",
        )
    return compiled


def _truthy(expression: Any, context: dict[str, Any]) -> tuple[bool, str | None]:
    try:
        return bool(expression(**context)), None
    except Exception as exc:  # noqa: BLE001 - an expression that cannot be evaluated fails its row
        return False, f"{type(exc).__name__}: {exc}"[:200]


def _row_outcome(
    check: CheckSpec, scope: str, kind: str, rows: int, bad: int, examples: list[dict[str, Any]]
) -> CheckOutcome:
    share = (rows - bad) / rows if rows else None
    passed = share is not None and share >= check.min_share
    detail = f"{rows - bad:,} of {rows:,} rows pass" if rows else "no rows to check"
    return CheckOutcome(
        _name(check), scope, kind, passed, rows, bad, share, f">= {check.min_share:.0%} of rows", detail, examples
    )


def _distribution(db: duckdb.DuckDBPyConnection, scope: str, check: CheckSpec, where: str) -> CheckOutcome:
    top = db.execute(
        f"SELECT CAST(({check.distribution}) AS VARCHAR) AS v, count(*) AS n FROM answers "
        f"WHERE {where} GROUP BY v ORDER BY n DESC, v LIMIT 5"
    ).fetchall()
    rows = _count(db, where)
    share = top[0][1] / rows if rows else None
    passed = share is not None and share <= (check.max_share or 1.0)
    shares = ", ".join(f"{v if v is not None else 'null'} {n / rows:.0%}" for v, n in top) if rows else ""
    detail = shares or "no rows to check"
    return CheckOutcome(
        _name(check), scope, "distribution", passed, rows, 0, share, f"each value <= {check.max_share:.0%}", detail
    )


def _metric(scope: str, check: CheckSpec, metrics: list[FieldMetrics]) -> CheckOutcome:
    reference = check.metric or ""
    if scope != "job" and not reference.startswith(f"{scope}."):
        reference = f"{scope}.{reference}"
    found = next((m for m in metrics if reference.startswith(m.name + ".")), None)
    if found is None:
        raise SpecError(
            f"{_where(scope)}: check '{_name(check)}': metric '{check.metric}' needs golden labels",
            hint="write it as <step>.<field>.<metric> and map the field to a label column with `expected:` on the step",
        )
    metric = reference[len(found.name) + 1 :]
    if metric.split(".")[0] not in _METRIC_NAMES.get(found.kind, ()):
        raise SpecError(
            f"{_where(scope)}: check '{_name(check)}': no metric '{metric}' for a {found.kind} field",
            hint=f"one of: {', '.join(_METRIC_NAMES.get(found.kind, ()))}",
        )
    outcome = _bounded(check, scope, "metric", found.values.get(metric), found.labelled)
    if outcome.value is None and found.labelled:
        outcome.detail = "no value (no labelled row of that class)"
    return outcome


def _bounded(check: CheckSpec, scope: str, kind: str, value: float | None, rows: int) -> CheckOutcome:
    low_ok = check.min is None or (value is not None and value >= check.min)
    high_ok = check.max is None or (value is not None and value <= check.max)
    bounds = [
        f">= {check.min:g}" if check.min is not None else "",
        f"<= {check.max:g}" if check.max is not None else "",
    ]
    detail = f"value {value:.4g} over {rows:,} rows" if value is not None else "no rows to check"
    return CheckOutcome(
        _name(check),
        scope,
        kind,
        value is not None and low_ok and high_ok,
        rows,
        0,
        value,
        " and ".join(b for b in bounds if b),
        detail,
    )


def _name(check: CheckSpec) -> str:
    if check.name:
        return check.name
    return next(
        str(v) for v in (check.row, check.sql, check.distribution, check.aggregate, check.metric) if v is not None
    )


def _where(scope: str) -> str:
    return "checks" if scope == "job" else f"steps.{scope}.checks"
