"""Apply-time resolve steps: judge the candidate pairs, then ask each cluster's canonical value.

Each round walks the step again (plan/resolve_walk.py) as far as stored answers reach and sends
what is missing: the pairs first, then (with `canonical: {prompt: ...}`) one request per cluster
with several values. A round goes through the same realtime or batch executor as any step
(budget, retries, durable batches), so a killed run resumes from what was stored and pays for
nothing twice. Finally each row's answer, `{cluster, canonical}`, is stored like a SQL step's
result, so later steps, the output and `export` read it like any answer.
"""

from __future__ import annotations

import json

import pyarrow as pa

from batchor.engine.rows import JobRows
from batchor.engine.types import WorkItem
from batchor.plan.model import StepPlan
from batchor.plan.plan_file import CompiledPlan
from batchor.plan.reduce import stored_lookup
from batchor.plan.resolve_plan import resolve_walker
from batchor.plan.resolve_walk import Member, ResolveResult, members_of
from batchor.plan.sql_step import result_key
from batchor.plan.step_kinds import canonical_plan, judge_plan
from batchor.state.base import RESULT_SCHEMA, StateStore


class ResolveRun:
    """One resolve step of one apply: its rows, and where its pairs and clusters stand."""

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
        self.walker = resolve_walker(step, plan.header.base_dir, plan.header.spec.get("templates"))
        self.sent: set[str] = set()  # keys sent by this run (with --refresh, the only answers read)
        stored = stored_lookup(store, judge_plan(step), retry_failed=retry_failed)
        self.lookup = (lambda keys: stored([k for k in keys if k in self.sent])) if refresh else stored
        self.members, self.skipped = self._members()
        self.result: ResolveResult | None = None

    def _members(self) -> tuple[list[Member], list[str]]:
        rows, skipped = JobRows(self.plan, self.store).answered_rows(self.step)
        return members_of(self.step, rows), skipped

    def pending(self) -> tuple[StepPlan, list[WorkItem]]:
        """The plan (judge or canonical) and the requests to send this round, each once."""
        self.result = result = self.walker.walk(self.members, self.lookup)
        sender = canonical_plan(self.step) if result.stage == "canonical" else judge_plan(self.step)
        items: dict[str, WorkItem] = {}
        for request, tokens in result.pending:
            if request.key not in self.sent:
                items.setdefault(request.key, WorkItem(request.key, sender.name, request.messages, tokens))
        self.sent |= set(items)
        return sender, list(items.values())

    def record(self, run_id: str) -> int:
        """Store each row's `{cluster, canonical}` once every request of the step is settled; until
        then (a stopped run) each row maps to a request still to send, so it shows as pending.
        Returns the rows answered."""
        result = self.result or self.walker.walk(self.members, self.lookup)
        row_keys = [m.key for m in self.members] + self.skipped
        answered: list[tuple[str, str]] = []
        if result.stage == "done":
            outputs = {
                row: json.dumps(answer, sort_keys=True, separators=(",", ":"))
                for row, answer in self.walker.row_answers(result).items()
            }
            answered = [(result_key(self.step, row, output), output) for row, output in outputs.items()]
            keys: list[str | None] = [a[0] for a in answered] + [None] * len(self.skipped)
            row_keys = list(outputs) + self.skipped
        else:
            keys = [result.pending[0][0].key] * len(self.members) + [None] * len(self.skipped)
        self.store.record_results(_results(self.step.name, answered, run_id), None)
        self.store.forget_run_requests(self.plan.job_id, self.step.name)
        table = pa.table({"row_key": pa.array(row_keys, pa.string()), "request_key": pa.array(keys, pa.string())})
        self.store.add_run_requests(self.plan.job_id, self.step.name, table)
        return len(answered)


def _results(step: str, answered: list[tuple[str, str]], run_id: str) -> pa.Table:
    n = len(answered)
    return pa.table(
        {
            "request_key": [a[0] for a in answered],
            "step": [step] * n,
            "status": ["succeeded"] * n,
            "output": [a[1] for a in answered],
            "error_code": [None] * n,
            "error": [None] * n,
            "attempts": [0] * n,
            "input_tokens": [0] * n,
            "output_tokens": [0] * n,
            "cost_usd": [0.0] * n,
            "run_id": [run_id] * n,
        },
        schema=RESULT_SCHEMA,
    )
