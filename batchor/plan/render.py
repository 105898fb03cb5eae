"""Plan stage: the requests of the root steps, rendered batch by batch into the plan data.

Each input batch is rendered (column-wise for simple templates, see `column_render.py`; Jinja row
by row otherwise), keyed and token-counted. The counts come at the end, in Arrow: one cache
query for the whole step, and duplicate requests counted once without a Python set holding
every key of the input.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from batchor.plan.column_render import FastStep, fast_step
from batchor.plan.model import StepPlan, req_column
from batchor.plan.request import StepRequests
from batchor.spec.inputs import InputReader
from batchor.spec.templates import StepTemplates
from batchor.state.base import StateStore
from batchor.state.cache import SMALL_KEYS, cached_mask, known_keys, settled_failure_mask

Known = tuple[pa.Array, pa.Array | None]  # keys with an answer, keys with a settled failure (state/cache.py)
_BATCH_ROWS = 32_768  # the Python strings of a batch (bodies, prompts, keys) are what bounds memory


@dataclass
class RowTally:
    """Counts of one root step; requests to run are deduplicated by `finish`."""

    rows: int = 0
    skipped: int = 0
    cached: int = 0
    to_run: int = 0
    input_tokens: int = 0  # of requests to run
    too_long: int = 0  # over the context window: fail without a call, cost nothing
    failed_earlier: int = 0  # failed before with a deterministic error: not sent again
    attachment_problems: int = 0  # requests whose attachments cannot be sent
    attachment_examples: list[str] = field(default_factory=list)
    _keys: list[pa.Array] = field(default_factory=list)  # every row's key but nulls, may repeat
    _tokens: list[pa.Array] = field(default_factory=list)

    def add(self, keys: pa.Array, tokens: pa.Array) -> None:
        self.rows += len(keys)
        self.skipped += keys.null_count
        if keys.null_count:
            present = keys.is_valid()
            keys, tokens = keys.filter(present), tokens.filter(present)
        self._keys.append(keys)
        self._tokens.append(tokens)

    def finish(
        self, step: StepPlan, store: StateStore | None, retry_failed: bool = False, known: Known | None = None
    ) -> None:
        """Count cached rows, rows that failed for good earlier (unless `retry_failed`), and
        unique requests to run. Keys are hashes: a big step is split by their first character,
        so each cache query, filter and deduplication holds a sixteenth of them. `known`: the
        cached and failed keys of many small steps, asked of the store at once (`_known`)."""
        keys = pa.chunked_array(self._keys, pa.string())
        tokens = pa.chunked_array(self._tokens, pa.int32())
        self._keys, self._tokens = [], []
        if len(keys) <= _BATCH_ROWS:
            self._finish_part(keys, tokens, step, store, retry_failed, known)
            return
        first = pc.utf8_slice_codeunits(keys, 0, 1)
        for prefix in pc.unique(first).to_pylist():
            part = pc.equal(first, prefix)
            self._finish_part(keys.filter(part), tokens.filter(part), step, store, retry_failed)

    def _finish_part(
        self,
        keys: pa.ChunkedArray,
        tokens: pa.ChunkedArray,
        step: StepPlan,
        store: StateStore | None,
        retry_failed: bool,
        known: Known | None = None,
    ) -> None:
        if store is not None:
            hit = pc.is_in(keys, value_set=known[0]) if known else cached_mask(store, keys)
            self.cached += pc.sum(hit).as_py() or 0
            keys, tokens = keys.filter(pc.invert(hit)), tokens.filter(pc.invert(hit))
        if store is not None and not retry_failed:
            failed = known[1] if known else None
            settled = pc.is_in(keys, value_set=failed) if failed is not None else settled_failure_mask(store, keys)
            self.failed_earlier += pc.sum(settled).as_py() or 0
            keys, tokens = keys.filter(pc.invert(settled)), tokens.filter(pc.invert(settled))
        self._count_unique(pa.table({"k": keys, "t": tokens}), step)

    def _count_unique(self, table: pa.Table, step: StepPlan) -> None:
        tokens = pc.cast(
            table.group_by("k", use_threads=False).aggregate([("t", "max")]).column("t_max"),
            pa.int64(),
        )
        if step.context_window is not None:  # too_long() of plan/context.py, column-wise
            long = pc.greater(tokens, pa.scalar(step.context_window - step.max_tokens, pa.int64()))
            self.too_long += pc.sum(long).as_py() or 0
            tokens = pc.filter(tokens, pc.invert(long))
        self.to_run += len(tokens)
        self.input_tokens += pc.sum(tokens).as_py() or 0


@dataclass
class _Rendered:
    keys: Sequence[str | None]
    bodies: pa.Array
    tokens: Sequence[int | None]


class _StepRenderer:
    """Renders one step's requests for a batch: column-wise when possible, else Jinja."""

    def __init__(self, step: StepPlan, tpl: StepTemplates, schema: pa.Schema) -> None:
        self.step, self.requests = step, StepRequests(step, tpl)
        self.fast: FastStep | None = (
            fast_step(step.system, step.prompt, step.when, schema)
            if not tpl.dynamic_row_access and not step.attachments
            else None
        )

    def render(self, batch: pa.RecordBatch, rows: list[dict] | None) -> _Rendered:
        if self.fast is not None:
            return self._render_columns(self.fast, batch)
        assert rows is not None
        return self._render_rows(batch.column(0).to_pylist(), rows)

    def _render_columns(self, fast: FastStep, batch: pa.RecordBatch) -> _Rendered:
        bodies = fast.bodies(batch)
        keys = self.requests.keys(bodies.to_pylist())
        contents = [(role, c if isinstance(c, str) else c.to_pylist()) for role, c in fast.render(batch)]
        counter = self.requests.counter
        if self.step.kind == "embed":  # the text alone (plan/request.py StepRequests.tokens)
            text = contents[-1][1]
            return _Rendered(
                keys,
                bodies,
                counter.count_batch(text) if not isinstance(text, str) else [counter.count(text)] * batch.num_rows,
            )
        counts, fixed = counter.count_chat_columns(contents, batch.num_rows), self.requests.fixed_tokens
        return _Rendered(keys, bodies, [n + fixed for n in counts] if fixed else counts)

    def _render_rows(self, row_keys: list[str], rows: list[dict]) -> _Rendered:
        rendered = [self.requests.render(k, {"row": row}) for k, row in zip(row_keys, rows)]
        keys = [r.key if r is not None else None for r in rendered]
        bodies = pa.array([r.body if r is not None else None for r in rendered], pa.string())
        return _Rendered(keys, bodies, self.requests.tokens(rendered))


def write_plan_data(
    reader: InputReader,
    path: Path,
    roots: list[StepPlan],
    templates: dict[str, StepTemplates],
    state: StateStore | None,
    refresh: frozenset[str],
    retry_failed: bool = False,
) -> dict[str, RowTally]:
    """Write the plan data (input columns + each root step's key, messages, tokens); count."""
    tallies = {s.name: RowTally() for s in roots}
    caches = {
        s.name: state if state is not None and s.name not in refresh and "*" not in refresh else None for s in roots
    }
    needed = _needed_columns(roots, templates, reader.columns)
    writer: pq.ParquetWriter | None = None
    renderers: list[_StepRenderer] | None = None
    try:
        for batch in reader.batches(_BATCH_ROWS):
            if renderers is None:
                renderers = [_StepRenderer(s, templates[s.name], batch.schema) for s in roots]
            rows = _rows(batch, needed) if any(r.fast is None for r in renderers) else None
            table = _with_step_columns(batch, rows, roots, renderers, tallies)
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema, compression="zstd")
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()
    for step, renderer in zip(roots, renderers or []):
        requests, tally = renderer.requests, tallies[step.name]
        tally.attachment_problems, tally.attachment_examples = requests.problems, requests.problem_examples
    known = _known(tallies, caches, retry_failed)
    for step in roots:
        tallies[step.name].finish(step, caches[step.name], retry_failed, known)
    return tallies


def _known(tallies: dict[str, RowTally], caches: dict[str, StateStore | None], retry_failed: bool) -> Known | None:
    """Many small steps (2,000 steps of 2 rows) ask the store about all their keys in one cache and
    one failure query, not two per step; None when the steps are few or their keys many."""
    asked = [name for name, store in caches.items() if store is not None]
    keys = [k for name in asked for k in tallies[name]._keys]
    if len(asked) < 2 or not keys or sum(len(k) for k in keys) > SMALL_KEYS:
        return None
    store = caches[asked[0]]
    assert store is not None
    return known_keys(store, pa.concat_arrays(keys).unique(), failures=not retry_failed)


def _with_step_columns(
    batch: pa.RecordBatch,
    rows: list[dict] | None,
    roots: list[StepPlan],
    renderers: list[_StepRenderer],
    tallies: dict[str, RowTally],
) -> pa.Table:
    """The batch's input columns plus each root step's request key, messages and tokens (tallied)."""
    table = pa.Table.from_batches([batch])
    for step, renderer in zip(roots, renderers):
        result = renderer.render(batch, rows)
        keys, tokens = pa.array(result.keys, pa.string()), pa.array(result.tokens, pa.int32())
        tallies[step.name].add(keys, tokens)
        table = table.append_column(req_column(step.name, "key"), keys)
        table = table.append_column(req_column(step.name, "messages"), result.bodies)
        table = table.append_column(req_column(step.name, "tokens"), tokens)
    return table


def _rows(batch: pa.RecordBatch, needed: list[str]) -> list[dict]:
    """The batch as row dicts of the columns templates use, for the Jinja path."""
    return batch.select(needed).to_pylist() if needed else [{} for _ in range(batch.num_rows)]


def _needed_columns(roots: list[StepPlan], templates: dict[str, StepTemplates], columns: list[str]) -> list[str]:
    if any(templates[s.name].dynamic_row_access for s in roots):
        return columns
    wanted = set().union(*(templates[s.name].row_columns for s in roots)) if roots else set()
    return [c for c in columns if c in wanted]
