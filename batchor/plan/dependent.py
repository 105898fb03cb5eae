"""Planning steps that use earlier steps' answers (pipelines).

Their requests only exist once the upstream answers do. Where those answers are already in the
state, the request is rendered now and checked against the cache like any other, so re-planning
an unchanged pipeline shows nothing to run. Where they are not, the rows are projected: counted
as to run (the upper bound) with a token estimate from a sample render, and the expected cost is
scaled by the `when` selectivity seen on rows that could be evaluated. Below a fan-out (see
fanout_rows.py) a row whose list is not known yet stands for `max_fanout` element rows (the upper
bound; unbounded without one), and for the elements seen per row so far in the expected cost.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from batchor.plan.dependent_tally import FAILED, PROJECTED, SKIPPED, DependentTally
from batchor.plan.fanout_rows import (
    Row,
    children,
    element_key,
    input_rows,
    order_steps,
    rows_table,
    step_levels,
    upstream,
)
from batchor.plan.model import StepPlan, req_column
from batchor.plan.projection import SAMPLES, earlier_answers, first_row, projected_tokens
from batchor.plan.request import RenderedRequest, StepRequests
from batchor.plan.sql_step import evaluate
from batchor.plan.step_kind import PER_GROUP
from batchor.plan.stored_answers import downstream, stored_answers
from batchor.spec.inputs import ROW_KEY
from batchor.spec.templates import StepTemplates
from batchor.state.base import StateStore

__all__ = [
    "FAILED",
    "SKIPPED",
    "DependentTally",
    "dependent_tallies",
    "earlier_answers",
    "first_row",
    "projected_tokens",
]


def dependent_tallies(
    data_path: Path,
    steps: list[StepPlan],
    templates: dict[str, StepTemplates],
    state: StateStore | None,
    refresh: frozenset[str],
    base_dir: str = ".",
    retry_failed: bool = False,
    reduce_rows: dict[str, list[Any]] | None = None,
) -> dict[str, DependentTally]:
    """Counts for every step that depends on another (or is SQL), from the plan data and the cache.
    Requests that failed for good earlier are counted apart and not run (unless `retry_failed`).
    A reduce step's rows (with what they read) go to `reduce_rows`: its groups span batches."""
    dependents = [s for s in order_steps(steps) if s.depends_on or s.local or s.kind in PER_GROUP]
    if not dependents:
        return {}
    by_name = {s.name: s for s in steps}
    tallies = {s.name: DependentTally() for s in dependents if s.kind not in PER_GROUP}
    roots = [s for s in steps if not s.depends_on and not s.local and s.kind not in PER_GROUP]
    for batch in pq.ParquetFile(data_path).iter_batches(batch_size=20000):
        table = pa.Table.from_batches([batch])
        keys = table.column(ROW_KEY).to_pylist()
        request_keys = {s.name: table.column(req_column(s.name, "key")).to_pylist() for s in roots}
        stored = stored_answers(
            state, [(by_name[n], found) for n, found in request_keys.items()], refresh, retry_failed
        )
        answers = {name: dict(zip(keys, downstream(found))) for name, found in zip(request_keys, stored)}
        identities: dict[str, dict[str, Any]] = {name: dict(zip(keys, found)) for name, found in request_keys.items()}
        inputs = table.select([c for c in table.column_names if not c.startswith("__req.")])
        row_values = [{k: v for k, v in r.items() if k != ROW_KEY} for r in inputs.to_pylist()]
        frames: dict[str | None, list[Row]] = {None: input_rows(keys)}
        for level in step_levels(dependents):
            rendered: list[tuple[StepPlan, list[Row], DependentTally, _Rendered]] = []
            for step in level:
                rows, tally = frames[step.grain], tallies.get(step.name, DependentTally())
                if step.kind in PER_GROUP and reduce_rows is not None:  # counted by reduce_plan.py, resolve_plan.py
                    found = reduce_rows.setdefault(step.name, [])
                    found += [(row, row_values[row.index], upstream(step, row, answers, by_name)) for row in rows]
                    answers[step.name] = {row.key: None for row in rows}
                elif not step.local:
                    known = (answers, identities)
                    made = _render_rows(step, templates[step.name], rows, row_values, known, by_name, tally)
                    rendered.append((step, rows, tally, made))
                else:
                    answers[step.name] = _plan_sql(step, inputs, rows, answers, by_name, base_dir, tally)
                    if step.fan_out:
                        frames[step.name] = _fan_out(step, rows, answers[step.name], tally)
            # one lookup for the level's steps (none reads another's answers), not two queries a step
            asked = [(step, [k if isinstance(k, str) else None for k in made.keys]) for step, _, _, made in rendered]
            for (step, rows, tally, made), cached in zip(rendered, stored_answers(state, asked, refresh, retry_failed)):
                answers[step.name] = _count_rows(rows, made, cached, tally)
    return tallies


def _plan_sql(
    step: StepPlan,
    inputs: pa.Table,
    rows: list[Row],
    answers: dict[str, dict[str, Any]],
    by_name: dict[str, StepPlan],
    base_dir: str,
    tally: DependentTally,
) -> dict[str, Any]:
    """Evaluate a SQL step on the rows whose upstream answers are known; it costs nothing."""
    known: list[Row] = []
    values: dict[str, list[Any]] = {d: [] for d in step.depends_on}
    result: dict[str, Any] = {}
    for row in rows:
        tally.rows += row.weight
        upstream_values = upstream(step, row, answers, by_name)
        state = _row_state(list(upstream_values.values()))
        if state == "known":
            known.append(row)
            for dep, value in upstream_values.items():
                values[dep].append(value)
        elif state == "projected":
            tally.project(row)
            result[row.key] = None
        else:
            tally.skipped += row.weight
            result[row.key] = SKIPPED
    outputs = evaluate(step, rows_table(inputs, known), values, by_name, base_dir) if known else {}
    for row in known:
        if row.key in outputs:
            tally.cached += 1
            result[row.key] = json.loads(outputs[row.key])
        else:
            tally.skipped += 1
            result[row.key] = SKIPPED
    return result


def _fan_out(step: StepPlan, rows: list[Row], results: dict[str, Any], tally: DependentTally) -> list[Row]:
    """The element rows below a fan-out step; a projected row stands for up to `max_fanout`."""
    tally.elements += sum(len(v) for v in results.values() if isinstance(v, list))
    bound = step.max_fanout
    mean = tally.elements / tally.cached if tally.cached else float(bound or 1)
    out: list[Row] = []
    for row in rows:
        value = results.get(row.key)
        if isinstance(value, list):
            out.extend(children(row, step.name, value))
        elif value is None:
            key = element_key(row.key, "*")
            out.append(
                Row(
                    key,
                    row.index,
                    {**row.keys, step.name: key},
                    {**row.elements, step.name: None},
                    row.weight * (bound or 1),
                    row.expected * mean,
                    row.unbounded or bound is None,
                )
            )
    return out


def _row_state(upstream_values: list[Any]) -> str:
    if any(v is SKIPPED for v in upstream_values):
        return "skipped"
    return "projected" if any(v is None for v in upstream_values) else "known"


@dataclass
class _Rendered:
    """A step's rows rendered now: each row's key (None: skipped, PROJECTED: not renderable yet)."""

    requests: StepRequests
    keys: list[Any]
    requests_now: list[RenderedRequest]


def _render_rows(
    step: StepPlan,
    tpl: StepTemplates,
    rows: list[Row],
    row_values: list[dict],
    known: tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]],
    by_name: dict[str, StepPlan],
    tally: DependentTally,
) -> _Rendered:
    """Render the rows whose upstream answers are known (their answers are looked up with the
    other steps of the level). `known`: per step, each row's answer and what identifies its
    request (identities gains this step's)."""
    answers, identities = known
    requests = StepRequests(step, tpl)
    keys: list[Any] = []
    rendered: list[RenderedRequest] = []
    row_only = tpl.when_reads_only_the_row()
    ident = identities.setdefault(step.name, {})
    for row in rows:
        tally.rows += row.weight
        values, gathered = _settle_gathered(upstream(step, row, answers, by_name))
        pending = _not_renderable(row, list(values.values()), (tpl, row_only), row_values[row.index], tally)
        if pending is not None:
            keys.append(None if pending is SKIPPED else PROJECTED)
            if pending is PROJECTED:
                if len(tally.projected_upstream) < len(tally.projected_rows):
                    tally.projected_upstream.append({**values, "gather": gathered} if gathered else values)
                ident[row.key] = _request_identity(step, tpl, row, row_values[row.index], identities)
                tally.identify(ident[row.key])
            continue
        tally.evaluated += 1
        if len(tally.known_upstream) < SAMPLES:
            tally.known_upstream.append(values)
        request = requests.render(row.key, {"row": row_values[row.index], **values})
        if request is None:
            tally.skipped += 1
            tally.skipped_by_when += 1
            keys.append(None)
            continue
        keys.append(request.key)
        ident[row.key] = request.key
        rendered.append(request)
    return _Rendered(requests, keys, rendered)


def _count_rows(rows: list[Row], rendered: _Rendered, cached: list[Any], tally: DependentTally) -> dict[str, Any]:
    """Count a step's rendered rows against their stored answers; each row's answer for later steps."""
    keys = rendered.keys
    real = [k if isinstance(k, str) else None for k in keys]
    cached = [None if k is PROJECTED else c for k, c in zip(keys, cached)]
    _count(tally, real, cached, rendered.requests.tokens(rendered.requests_now))
    _remember_unanswered(tally, rows, keys, cached)
    return {row.key: answer for row, answer in zip(rows, downstream(cached))}


def _settle_gathered(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Gathered neighbours (plan/gather.py): those that never answer are left out, as in apply;
    one not known yet leaves the row projected (`gather` None). Also returns what is known."""
    found = values.get("gather")
    if not found:
        return values, {}
    known = {
        dep: {side: [a for a in items if a is not SKIPPED] for side, items in sides.items()}
        for dep, sides in found.items()
    }
    waiting = any(a is None for sides in known.values() for items in sides.values() for a in items)
    return {**values, "gather": None if waiting else known}, known


def _request_identity(
    step: StepPlan, tpl: StepTemplates, row: Row, values: dict[str, Any], identities: dict[str, dict[str, Any]]
) -> Any:
    """What decides the request a projected row will send: the upstream requests it reads and the
    columns its templates read (rows alike in both send one request). None where not known."""
    if step.grain is not None or row.weight != 1:  # below a fan-out: each element row on its own
        return None
    parts = []
    for dep in step.depends_on:
        found = identities.get(dep, {}).get(row.key)
        if found is None:  # a SQL step's rows: not tracked
            return None
        parts.append(found)
    read = sorted(values) if tpl.dynamic_row_access else sorted(tpl.row_columns)
    columns = [(c, values.get(c)) for c in read]
    try:
        return hash((step.name, tuple(parts), tuple(columns)))
    except TypeError:  # a list or mapping value
        return hash((step.name, tuple(parts), repr(columns)))


def _not_renderable(
    row: Row, values: list[Any], when: tuple[StepTemplates, bool], row_values: dict[str, Any], tally: DependentTally
) -> Any:
    """SKIPPED (an upstream answer never comes, or a `when:` on the row alone says no) or
    PROJECTED (upstream answers not known yet) for a row that cannot be rendered now; else None."""
    if any(v is SKIPPED for v in values):
        tally.skipped += row.weight
        tally.skipped_upstream += row.weight
        return SKIPPED
    if not any(v is None for v in values):
        return None
    if when[1] and _skipped_by_row(when[0], row_values, tally):
        tally.skipped += row.weight
        return SKIPPED
    tally.project(row)
    if len(tally.projected_rows) < SAMPLES:
        tally.projected_rows.append(row_values)
    return PROJECTED


def _skipped_by_row(tpl: StepTemplates, row_values: dict[str, Any], tally: DependentTally) -> bool:
    """A row whose upstream answers are not known yet, but whose `when:` reads only the row:
    decided now, so the projection counts only the rows that will run."""
    try:
        runs = tpl.should_run({"row": row_values})
    except Exception:  # noqa: BLE001 - decided during apply, where a failure names the row
        return False
    tally.when_decided = True
    return not runs


def _remember_unanswered(tally: DependentTally, rows: list[Row], keys: list[Any], cached: list[Any]) -> None:
    """Keep the rows to run (rendered or projected) so `changed` can be split by cause."""
    pairs = [(row.key, key) for row, key, answer in zip(rows, keys, cached) if isinstance(key, str) and answer is None]
    if pairs:
        tally.unanswered.append(
            pa.table(
                {
                    "row_key": pa.array([p[0] for p in pairs], pa.string()),
                    "request_key": pa.array([p[1] for p in pairs], pa.string()),
                }
            )
        )
    projected = [row.key for row, key in zip(rows, keys) if key is PROJECTED]
    if projected:
        tally.projected_keys.append(pa.array(projected, pa.string()))


def _count(tally: DependentTally, keys: list[str | None], answers: list[Any], tokens: list[int | None]) -> None:
    """Rendered requests: cached, failed for good earlier, or to run (each unique request once)."""
    counts = iter(tokens)
    for key, answer in zip(keys, answers):
        if key is None:
            continue
        n = next(counts) or 0
        if answer is FAILED:
            tally.failed_earlier += 1
        elif answer is not None:
            tally.cached += 1
        elif key not in tally.run_keys:
            tally.run_keys.add(key)
            tally.to_run += 1
            tally.input_tokens += n
