"""A human in the loop: export answers to review, import a person's corrections as reviewed labels.

`export_review` writes the answers a SQL filter picks (low confidence, disputed, a random
sample) with their input, answer and model, and blank `review.<field>` columns
(review/files.py). `import_review` checks the whole file against the job first (its rows, its
columns, each corrected value against its field's schema) and then stores every correction in one
transaction (state/reviews.py), with who reviewed, when, from which file and the file's SHA-256:
a mismatch is a `review_file_mismatch` error and nothing is stored.

Reviewed labels then replace the model's answers in the output (`_reviewed` names the fields,
outputs/reviewed.py), are golden labels for `check` and `diff` (quality/metrics.py), and survive
any later apply or `--refresh`: they are stored apart from the answers.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from batchor.errors import ReviewFileError, ReviewFilterError, RunNotFoundError
from batchor.outputs.export import write_output
from batchor.plan.model import StepPlan
from batchor.plan.plan_file import CompiledPlan, load_plan
from batchor.quality.answers import answer_fields, load_answers, q
from batchor.quality.sources import resolve_source
from batchor.review.files import META, REVIEW_PREFIX, is_blank, read_rows, write_rows
from batchor.state.reviews import ReviewedLabel, ReviewSource

if TYPE_CHECKING:
    from batchor.state.base import StateStore


@dataclass(frozen=True)
class ReviewExport:
    path: Path
    step: str
    rows: int  # rows written
    matched: int  # rows the filter picked, before --sample


@dataclass(frozen=True)
class ReviewImport:
    path: Path
    job: str
    step: str
    rows: int  # rows of the file
    corrections: int  # reviewed labels stored (non-blank review cells)
    reviewer: str
    sha256: str
    output: Path  # the job's output file, written again with the reviewed values


def export_review(
    spec: str | Path,
    output: str | Path,
    *,
    where: str | None = None,
    sample: int | None = None,
    step: str | None = None,
    seed: int = 0,
    state: str | None = None,
) -> ReviewExport:
    """Write the latest run's answers of `step` (default: the spec's first LLM step) that `where`
    (one SQL boolean expression over the answers table, as `check` sees it) picks, at most `sample`
    of them drawn at random with `seed`, to a .csv or .jsonl review file."""
    source = resolve_source(spec, state)
    target = _step(source.plan, step)
    rows, matched = _picked(source.plan, source.store, target, where, sample, seed)
    fields = answer_fields(target)
    columns = [*META, *source.plan.header.input.columns, *fields, "_model", *(REVIEW_PREFIX + f for f in fields)]
    for row in rows:
        row.update(_job=source.plan.header.name, _step=target.name, _model=f"{target.provider}:{target.model}")
    write_rows(Path(output), columns, rows)
    return ReviewExport(Path(output), target.name, len(rows), matched)


def _step(plan: CompiledPlan, name: str | None) -> StepPlan:
    steps = [s for s in plan.header.steps if s.kind == "llm"]
    found = next((s for s in steps if s.name == name), None) if name else (steps[0] if steps else None)
    if found is None:
        names = ", ".join(s.name for s in steps) or "none"
        raise ReviewFilterError(f"no LLM step {name!r} to review (LLM steps: {names})", hint="name one with --step")
    return found


def _picked(
    plan: CompiledPlan, store: StateStore, step: StepPlan, where: str | None, sample: int | None, seed: int
) -> tuple[list[dict[str, Any]], int]:
    """The answered rows of `step` the filter picks (input columns, answer fields), in a DuckDB
    of their own holding only the answers table, with external access off and settings locked."""
    from batchor.duck import memory_db

    db = memory_db()
    try:
        load_answers(db, plan, store)
        db.execute("SET enable_external_access = false")
        db.execute("SET lock_configuration = true")
        condition = _condition(where)
        answered = f"{q('_ok.' + step.name)} AND ({condition})"
        try:
            (matched,) = db.execute(f"SELECT count(*) FROM answers WHERE {answered}").fetchone() or (0,)
            limit = f" LIMIT {int(sample)}" if sample is not None else ""
            order = f"hash(_row_key || '#{int(seed)}')" if sample is not None else "_row_key"
            keys = [
                k
                for (k,) in db.execute(
                    f"SELECT _row_key FROM answers WHERE {answered} ORDER BY {order}{limit}"
                ).fetchall()
            ]
            return [_row(db, plan, step, key) for key in keys], int(matched)
        except Exception as exc:  # noqa: BLE001 - DuckDB's errors name the problem in the expression
            raise ReviewFilterError(
                f"--where {where!r} failed over the answers: {str(exc).splitlines()[0][:300]}",
                hint='one SQL boolean expression over the answers, e.g. "classify.score <= 2" or '
                "\"classify.sentiment = 'mixed'\"",
            ) from None
    finally:
        db.close()


def _condition(where: str | None) -> str:
    """The filter as one expression: a second statement or a comment is refused."""
    if where is None or not where.strip():
        return "true"
    if ";" in where or "--" in where or "/*" in where:
        raise ReviewFilterError(
            f"--where {where!r}: one SQL expression, without ';' or comments", hint='e.g. "classify.score <= 2"'
        )
    return where


def _row(db: Any, plan: CompiledPlan, step: StepPlan, key: str) -> dict[str, Any]:
    columns = [q(c) for c in plan.header.input.columns] + [q(step.name)]
    (text,) = db.execute(
        f"SELECT to_json(struct_pack({', '.join(columns)})) FROM answers WHERE _row_key = ?", [key]
    ).fetchone()
    values = json.loads(text)
    answer = values.pop(step.name)
    fields = {"text": answer} if step.schema is None else (answer if isinstance(answer, dict) else {})
    return {"_row_key": key, **values, **fields}


def import_review(path: str | Path, *, reviewer: str | None = None, state: str | None = None) -> ReviewImport:
    """Check a filled-in review file against its job, then store its corrections, all or none."""
    from batchor.state import open_existing_state

    file = Path(path)
    columns, rows = read_rows(file)
    missing = [c for c in META if c not in columns]
    if missing or not rows:
        raise ReviewFileError(
            f"{file}: " + (f"column(s) {', '.join(missing)} missing" if missing else "no rows"),
            hint="import the file `batchor review export` wrote, with its columns kept",
        )
    job, step_name = _one(rows, "_job", file), _one(rows, "_step", file)
    store = open_existing_state(state)
    plan = _plan_of_job(store, job)
    step = _step(plan, step_name)
    labels = _labels(file, plan, step, columns, rows)
    digest = hashlib.sha256(file.read_bytes()).hexdigest()
    who = reviewer or os.environ.get("USER") or getpass.getuser()
    store.save_reviews(job, labels, ReviewSource(who, str(file.resolve()), digest))
    output = write_output(plan, store)  # the reviewed values show in the output at once
    return ReviewImport(file, job, step.name, len(rows), len(labels), who, digest, output)


def _one(rows: list[dict[str, Any]], column: str, file: Path) -> str:
    values = {str(r.get(column) or "") for r in rows}
    if len(values) != 1 or "" in values:
        raise ReviewFileError(f"{file}: column {column} must hold one value on every row, found {sorted(values)[:5]}")
    return values.pop()


def _plan_of_job(store: StateStore, job: str) -> CompiledPlan:
    for run in store.list_runs(500):
        if run.name == job and run.plan_path and Path(run.plan_path).is_file():
            return load_plan(Path(run.plan_path))
    raise RunNotFoundError(f"no run of job '{job}' with its plan in state {store.location}", hint="pass --state")


def _labels(
    file: Path, plan: CompiledPlan, step: StepPlan, columns: list[str], rows: list[dict[str, Any]]
) -> list[ReviewedLabel]:
    """The corrections of the file, each checked; the first problem stops the import."""
    fields = answer_fields(step)
    reviewed = [c for c in columns if c.startswith(REVIEW_PREFIX)]
    unknown = [c for c in reviewed if c.removeprefix(REVIEW_PREFIX) not in fields]
    if unknown or not reviewed:
        raise ReviewFileError(
            f"{file}: " + (f"unknown review column(s) {', '.join(unknown)}" if unknown else "no review.* column"),
            hint=f"step {step.name} has the fields {', '.join(REVIEW_PREFIX + f for f in fields)}",
        )
    keys = [str(r.get("_row_key") or "") for r in rows]
    _check_keys(file, plan, keys)
    labels = []
    for number, (key, row) in enumerate(zip(keys, rows), start=2):
        for column in reviewed:
            if not is_blank(row.get(column)):
                field = column.removeprefix(REVIEW_PREFIX)
                value = _value(file, number, column, step, field, row[column])
                model = row.get(field if step.schema is not None else "text")
                labels.append(ReviewedLabel(step.name, key, field, value, None if model is None else str(model)))
    return labels


def _check_keys(file: Path, plan: CompiledPlan, keys: list[str]) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    from batchor.spec.inputs import ROW_KEY

    if len(set(keys)) != len(keys) or "" in keys:
        raise ReviewFileError(f"{file}: every row needs its own _row_key (a key is empty or repeated)")
    wanted, found = pa.array(keys, pa.string()), 0
    for batch in plan.iter_batches([ROW_KEY]):
        found += pc.sum(pc.is_in(batch.column(0), value_set=wanted)).as_py() or 0
    if found != len(keys):
        raise ReviewFileError(
            f"{file}: {len(keys) - found} row key(s) are not rows of job '{plan.header.name}'",
            hint="import the file exported from this job, with its _row_key column unchanged",
        )


def _value(file: Path, line: int, column: str, step: StepPlan, field: str, cell: Any) -> str:
    """A corrected cell as the field's JSON, checked against the field's schema."""
    from batchor.schema.core import validator_for

    if step.schema is None:
        return json.dumps(str(cell), ensure_ascii=False)
    schema = (step.schema.get("properties") or {}).get(field) or {}
    value = cell
    if isinstance(cell, str) and schema.get("type") != "string" and "enum" not in schema:
        try:
            value = json.loads(cell)
        except ValueError:
            value = cell
    problems = validator_for(schema)(value)
    if problems:
        raise ReviewFileError(
            f"{file}, row {line}, {column}: {value!r} is not a valid {field} ({problems[0]})",
            hint=f"allowed: {schema.get('enum')}" if schema.get("enum") else "fix the cell, or leave it blank",
        )
    return json.dumps(value, ensure_ascii=False)


__all__ = ["ReviewExport", "ReviewImport", "export_review", "import_review"]
