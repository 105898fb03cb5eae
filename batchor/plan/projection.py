"""Planning, projection: the input tokens of requests that cannot be rendered yet.

A step below an unanswered upstream step is rendered for a sample of its projected rows, with
upstream answers stored for other rows (or earlier runs) where there are some, else sample answers
from the upstream schema or its expected length (plan/dependent.py counts those rows).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from batchor.plan.model import StepPlan
from batchor.plan.request import StepRequests
from batchor.schema.sample_values import sample_value
from batchor.spec.inputs import ROW_KEY
from batchor.spec.templates import StepTemplates
from batchor.state.answer_stats import stored_answers
from batchor.state.base import StateStore

if TYPE_CHECKING:
    from batchor.plan.dependent import DependentTally

SAMPLES = 32  # rows (and known upstream answers) a projection's input tokens are rendered from


def projected_tokens(
    step: StepPlan,
    tpl: StepTemplates,
    tally: DependentTally,
    fallback_row: dict[str, Any],
    by_name: dict[str, StepPlan],
) -> tuple[int, int]:
    """(mean, max) input tokens of a projected request: the step rendered for up to SAMPLES of its
    projected rows, each with upstream answers stored for other rows where there are some (else
    sample answers from the upstream schema or expected length)."""
    rows = tally.projected_rows or [fallback_row]
    counts = []
    for i, row in enumerate(rows):
        upstream = tally.known_upstream[i % len(tally.known_upstream)] if tally.known_upstream else None
        own = tally.projected_upstream[i] if i < len(tally.projected_upstream) else {}
        # what the row itself already has (its chunk, some answers), the rest from other rows or samples
        upstream = {**(upstream or {}), **{k: v for k, v in own.items() if v is not None and k != "gather"}}
        if step.gather:  # the neighbours this row has, their answers where known (else samples)
            upstream["gather"] = _sample_gathered(step, own.get("gather"), upstream, by_name)
        counts.append(_render_tokens(step, tpl, row, upstream, by_name))
    return round(sum(counts) / len(counts)), max(counts)


def _sample_gathered(
    step: StepPlan, gathered: dict[str, Any] | None, upstream: dict[str, Any] | None, by_name: dict[str, StepPlan]
) -> dict[str, Any]:
    """A projected row's gathered neighbours: its own where known, each unknown answer a sample
    (an answer seen for another row, else one from the schema); a whole window when not known."""
    out = {}
    for dep, (before, after) in step.gather.items():
        seen = (upstream or {}).get(dep)
        sample = seen if seen is not None else _sample_answer(by_name[dep])
        sides = (gathered or {}).get(dep) or {"before": [None] * before, "after": [None] * after}
        out[dep] = {side: [sample if a is None else a for a in items] for side, items in sides.items()}
    return out


def _sample_answer(step: StepPlan) -> Any:
    """A stand-in answer of `step`: from its schema, else its expected length of text."""
    return sample_value(step.schema, "projection") if step.schema is not None else "x " * step.expected_output_tokens


def earlier_answers(state: StateStore, step: StepPlan, by_name: dict[str, StepPlan]) -> list[dict[str, Any]]:
    """Upstream answers for a projection when this input has none yet: accepted answers of the
    upstream steps' length keys from earlier runs (one per upstream step in each sample)."""
    found: dict[str, list[Any]] = {}
    for dep in step.depends_on:
        upstream_step = by_name[dep]
        if upstream_step.local or upstream_step.fan_out or step.grain or not upstream_step.length_key:
            continue  # a fan-out's rows and SQL results are not one answer per row: sample values stay
        texts = stored_answers(state, upstream_step.length_key, SAMPLES)
        try:
            answers = [json.loads(t) for t in texts] if upstream_step.json_answers else texts
        except ValueError:
            continue
        if answers:
            found[dep] = answers
    if not found:
        return []
    return [
        {dep: answers[i % len(answers)] for dep, answers in found.items()}
        for i in range(max(len(a) for a in found.values()))
    ]


def _render_tokens(
    step: StepPlan,
    tpl: StepTemplates,
    row: dict[str, Any],
    upstream: dict[str, Any] | None,
    by_name: dict[str, StepPlan],
) -> int:
    context: dict[str, Any] = {"row": {k: v for k, v in row.items() if k != ROW_KEY}}
    for dep in step.depends_on:
        if upstream is not None and upstream.get(dep) is not None:
            context[dep] = upstream[dep]
        else:
            context[dep] = _sample_answer(by_name[dep])
    if upstream is not None and "gather" in upstream:
        context["gather"] = upstream["gather"]
    requests = StepRequests(step, tpl)
    try:
        messages = tpl.render_messages(context)
        attached = requests.attachment_tokens(context)
    except Exception:  # noqa: BLE001 - a projection only; the real render reports errors
        return 200
    return requests.counter.count_messages(messages) + requests.fixed_tokens + attached


def first_row(data_path: Path) -> dict[str, Any]:
    for batch in pq.ParquetFile(data_path).iter_batches(batch_size=1):
        table = pa.Table.from_batches([batch])
        return table.select([c for c in table.column_names if not c.startswith("__req.")]).to_pylist()[0]
    return {}
