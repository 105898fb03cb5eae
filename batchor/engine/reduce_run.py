"""Apply-time reduce steps: group the rows, then send each group's fold tree round by round.

Each round walks every group's tree (plan/reduce.py) as far as stored answers reach and collects
the requests to send now: the first-level parts, or a level of folds once the parts below are
answered. The round's requests go through the same realtime or batch executor as any step
(budget, retries, durable batches), so a killed run resumes from what was stored. Finally each
row is mapped to its group's answer (or to the request that failed), like any step's rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa

from batchor.engine.pending import PendingKeys
from batchor.engine.rows import JobRows
from batchor.engine.types import WorkItem
from batchor.engine.work import StepWork
from batchor.outputs.export import format_for
from batchor.outputs.groups import write_groups
from batchor.plan.model import StepPlan
from batchor.plan.plan_file import CompiledPlan
from batchor.plan.reduce import Group, WalkResult, grouped, stored_lookup
from batchor.plan.reduce_plan import walker_for
from batchor.state.base import StateStore


class ReduceRun:
    """One reduce step of one apply: its groups, and where each stands."""

    def __init__(
        self,
        plan: CompiledPlan,
        step: StepPlan,
        store: StateStore,
        *,
        refresh: bool = False,
        retry_failed: bool = False,
    ) -> None:
        self.plan, self.step, self.store = plan, step, store
        self.walker = walker_for(step, plan.header.base_dir, plan.header.spec.get("templates"))
        self.sent: set[str] = set()  # keys sent by this run (with --refresh, the only answers read)
        stored = stored_lookup(store, step, retry_failed=retry_failed)
        self.lookup = self._fresh_only(stored) if refresh else stored
        self.groups, self.skipped = self._grouped()
        self.walks: dict[int, WalkResult] = {}

    def _fresh_only(self, stored: Callable[[list[str]], dict[str, tuple[str, Any]]]) -> Any:
        return lambda keys: stored([k for k in keys if k in self.sent])

    def _grouped(self) -> tuple[list[Group], list[str]]:
        members, skipped = JobRows(self.plan, self.store).answered_rows(self.step)
        assert self.step.reduce is not None
        return list(grouped(members, self.step.reduce.group_by).values()), skipped

    def pending(self) -> list[WorkItem]:
        """Requests to send this round (each once), after walking every group again."""
        items: dict[str, WorkItem] = {}
        for i, group in enumerate(self.groups):
            self.walks[i] = walk = self.walker.walk(group, self.lookup)
            for request, tokens in walk.pending:
                if request.key not in self.sent:
                    items.setdefault(request.key, WorkItem(request.key, self.step.name, request.messages, tokens))
        self.sent |= set(items)
        return list(items.values())

    def record(self) -> None:
        """Map each row to its group's answer, or the request of its group that failed or waits."""
        row_keys: list[str] = list(self.skipped)
        keys: list[str | None] = [None] * len(self.skipped)
        for i, group in enumerate(self.groups):
            walk = self.walks.get(i) or self.walker.walk(group, self.lookup)
            key = walk.final or walk.failed or (walk.pending[0][0].key if walk.pending else None)
            row_keys += group.row_keys
            keys += [key] * len(group.row_keys)
        self.store.forget_run_requests(self.plan.job_id, self.step.name)
        table = pa.table({"row_key": pa.array(row_keys, pa.string()), "request_key": pa.array(keys, pa.string())})
        self.store.add_run_requests(self.plan.job_id, self.step.name, table)

    def answers(self) -> list[tuple[dict[str, Any], int, str | None]]:
        """Per group: its key, its rows, and its answer's request key (None: not answered)."""
        for i, group in enumerate(self.groups):
            if i not in self.walks:
                self.walks[i] = self.walker.walk(group, self.lookup)
        return [(g.key, len(g.row_keys), self.walks[i].final) for i, g in enumerate(self.groups)]


def write_group_outputs(
    plan: CompiledPlan, store: StateStore, output: Path, done: list[ReduceRun] | None = None
) -> list[Path]:
    """Each reduce step's groups beside `output` (outputs/groups.py), as the state has them now;
    `done`: reduce steps an apply just ran (their groups are known already)."""
    runs = {r.step.name: r for r in done or []}
    written = []
    for step in (s for s in plan.header.steps if s.kind == "reduce"):
        reduce = runs.get(step.name) or ReduceRun(plan, step, store)
        written.append(
            write_groups(output, format_for(output) or plan.header.output.format, step, store, reduce.answers())
        )
    return written


class RoundWork(StepWork):
    """One round of a reduce step as a batch lane's work: exactly these requests."""

    def __init__(self, plan: CompiledPlan, step: StepPlan, store: StateStore, items: list[WorkItem]) -> None:
        super().__init__(plan, step, store)
        self.round = {item.key: item for item in items}
        self.pending = PendingKeys(pa.array(list(self.round), pa.string()))

    @property
    def widens(self) -> bool:
        """Each round adds the step's next keys: a shared run lists them beside the earlier rounds'."""
        return True

    def items(self, wanted: Callable[[str], bool] | None = None) -> Iterator[WorkItem]:
        for key in self.pending:
            if key in self.round and (wanted is None or wanted(key)):
                yield self.round[key]
