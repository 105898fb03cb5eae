"""What a job's answers look like, for the report: answer values per enum/boolean field, a seeded
random sample and one example per class per step (with the input and the prompt as rendered), and
answers flagged as empty or suspicious.

Read from the answers table (`quality/answers.py`) by DuckDB, never from the state's tables: the
same rows, typed answers and reviewed overrides that `check` and the output file see. A sample is
drawn by hashing each row key with the seed, so the same seed shows the same rows.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from batchor.duck import duckdb
from batchor.plan.model import StepPlan
from batchor.plan.plan_file import CompiledPlan
from batchor.quality.answers import (
    answer_fields,
    connect,
    error_columns,
    field_kind,
    field_sql,
    load_answers,
    ok_column,
    q,
)

if TYPE_CHECKING:
    from batchor.state.base import StateStore

SAMPLES = 5  # random answered rows per step
FAILED_SAMPLES = 3  # random failed rows per step, with their error
FLAGGED = 5  # flagged examples per step
PROMPT_CHARS = 4000  # rendered prompt kept per example
# Openings of answers that decline or hedge instead of answering: a text answer starting so is flagged.
SUSPICIOUS = ("i'm sorry", "i am sorry", "i cannot", "i can't", "as an ai", "sorry,", "unfortunately")


def answer_profile(plan: CompiledPlan, store: StateStore, seed: int = 0) -> dict[str, Any]:
    """Distributions, samples and flagged answers of every LLM step of `plan`'s job."""
    db = connect(plan)
    try:
        load_answers(db, plan, store, errors=True)
        steps = [s for s in plan.header.steps if s.kind == "llm"]
        samples = [x for s in steps for x in _samples(db, plan, s, seed)]
        return {
            "seed": seed,
            "distributions": [d for s in steps for d in _distributions(db, s)],
            "samples": samples,
            "flagged": [f for s in steps for f in _flagged(db, s)],
        }
    finally:
        db.close()


def _distributions(db: duckdb.DuckDBPyConnection, step: StepPlan) -> list[dict[str, Any]]:
    """Answers per value of each enum or boolean field (unanswered rows apart)."""
    found = []
    for name in answer_fields(step):
        if field_kind(step, name) != "enum":
            continue
        value = field_sql(step, name)
        rows = db.execute(
            f"SELECT CAST({value} AS VARCHAR), count(*) FROM answers WHERE {q(ok_column(step.name))} "
            "GROUP BY 1 ORDER BY 2 DESC, 1"
        ).fetchall()
        counts = [{"value": "(none)" if v is None else str(v), "rows": int(n)} for v, n in rows]
        found.append({"step": step.name, "field": name, "counts": counts})
    return found


def _draw(seed: int) -> str:
    return f"hash(_row_key || '#{int(seed)}')"


def _samples(db: duckdb.DuckDBPyConnection, plan: CompiledPlan, step: StepPlan, seed: int) -> list[dict[str, Any]]:
    """SAMPLES random answered rows, then one row per value of the step's first enum field."""
    ok, draw = q(ok_column(step.name)), _draw(seed)
    picked = [
        ("random", key)
        for (key,) in db.execute(f"SELECT _row_key FROM answers WHERE {ok} ORDER BY {draw} LIMIT {SAMPLES}").fetchall()
    ]
    enum = next((f for f in answer_fields(step) if field_kind(step, f) == "enum"), None)
    if enum is not None:
        value = field_sql(step, enum)
        picked += [
            (f"{enum} = {v}", key)
            for v, key in db.execute(
                f"SELECT CAST({value} AS VARCHAR), _row_key FROM answers WHERE {ok} AND {value} IS NOT NULL "
                f"QUALIFY row_number() OVER (PARTITION BY {value} ORDER BY {draw}) = 1 ORDER BY 1"
            ).fetchall()
        ]
    seen: set[str] = set()
    unique = [(why, key) for why, key in picked if not (key in seen or seen.add(key))]  # type: ignore[func-returns-value]
    return [_example(db, plan, step, why, key) for why, key in unique] + _failed(db, plan, step, seed)


def _failed(db: duckdb.DuckDBPyConnection, plan: CompiledPlan, step: StepPlan, seed: int) -> list[dict[str, Any]]:
    """FAILED_SAMPLES random rows the step failed, each with its error code and message."""
    code, message = (q(c) for c in error_columns(step.name))
    rows = db.execute(
        f"SELECT _row_key, {code}, {message} FROM answers WHERE {code} IS NOT NULL "
        f"ORDER BY {_draw(seed)} LIMIT {FAILED_SAMPLES}"
    ).fetchall()
    return [
        {**_example(db, plan, step, "failed", key), "error_code": error_code, "error": error}
        for key, error_code, error in rows
    ]


def _example(db: duckdb.DuckDBPyConnection, plan: CompiledPlan, step: StepPlan, why: str, key: str) -> dict[str, Any]:
    columns = plan.header.input.columns
    names = [q(c) for c in columns] + [q(s.name) for s in plan.header.steps]
    row = db.execute(
        f"SELECT to_json(struct_pack({', '.join(names)})) FROM answers WHERE _row_key = ?", [key]
    ).fetchone()
    values = json.loads(row[0]) if row else {}
    inputs = {c: values.get(c) for c in columns}
    answers = {s.name: values.get(s.name) for s in plan.header.steps}
    return {
        "step": step.name,
        "row_key": key,
        "why": why,
        "answer": answers.get(step.name),
        "input": inputs,
        "prompt": _prompt(plan, step, key, inputs, answers),
    }


def _prompt(plan: CompiledPlan, step: StepPlan, key: str, inputs: dict[str, Any], answers: dict[str, Any]) -> str:
    """The messages the row's request sent, rendered again from the plan's templates."""
    from batchor.errors import BatchorError
    from batchor.plan.request import pinned_requests

    context = {"row": inputs, **{name: answers.get(name) for name in step.depends_on}}
    try:
        rendered = pinned_requests(step, plan.header.base_dir).render(key, context)
    except BatchorError as exc:
        return f"(the prompt cannot be rendered again: {exc.message})"
    if rendered is None:
        return "(the step's when: skips this row)"
    text = "\n\n".join(f"[{m['role']}]\n{m.get('content')}" for m in rendered.messages)
    return text if len(text) <= PROMPT_CHARS else text[:PROMPT_CHARS] + " ..."


def _flagged(db: duckdb.DuckDBPyConnection, step: StepPlan) -> list[dict[str, Any]]:
    """Text answers that are empty (accepted with `allow_empty`) or open like a refusal."""
    if step.schema is not None:
        return []
    answer = f"lower(trim({q(step.name)}))"
    empty = f"{answer} = ''"
    odd = " OR ".join(f"starts_with({answer}, '{s.replace(chr(39), chr(39) * 2)}')" for s in SUSPICIOUS)
    rows = db.execute(
        f"SELECT _row_key, {q(step.name)}, {empty} FROM answers WHERE {q(ok_column(step.name))} "
        f"AND ({empty} OR {odd}) ORDER BY _row_key LIMIT {FLAGGED}"
    ).fetchall()
    (total,) = db.execute(
        f"SELECT count(*) FROM answers WHERE {q(ok_column(step.name))} AND ({empty} OR {odd})"
    ).fetchone() or (0,)
    examples = [{"row_key": k, "answer": a, "reason": "empty" if e else "reads like a refusal"} for k, a, e in rows]
    return [{"step": step.name, "rows": int(total), "examples": examples}] if total else []
