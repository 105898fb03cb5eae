"""The checks of an apply before any call: the budget (upper bound vs --max-cost and the spec's
`limits.max_cost_usd`, unpriced models, unbounded fan-outs), the output target, and that the plan
still matches its input and its SQL files. Each refusal is a coded error and nothing is sent.
"""

from __future__ import annotations

import dataclasses

from batchor.engine.budget import plan_budget, raise_hint
from batchor.engine.run_types import ApplyOptions
from batchor.errors import CostLimitError, CostUnboundedError, NoPriceError, StalePlanError
from batchor.humanize import money
from batchor.outputs.export import check_output_target
from batchor.plan.compile import check_input_unchanged
from batchor.plan.plan_file import CompiledPlan
from batchor.plan.sql_files import changed_sql_file
from batchor.state.base import StateStore
from batchor.state.postgres_store import PostgresStore
from batchor.state.spend import unfinished_job_spend


def check_before_run(plan: CompiledPlan, store: StateStore, options: ApplyOptions) -> ApplyOptions:
    """Refuse the plan before any call, or return the options with what the job's unfinished earlier
    runs spent (`carried`) when a budget applies."""
    header = plan.header
    if plan_budget(options.max_cost, header)[0] is not None:
        carried, _ = unfinished_job_spend(store, plan.job_id, skip_live=isinstance(store, PostgresStore))
        options = dataclasses.replace(options, carried=carried)
    check_budget(plan, options.max_cost, options.carried)
    check_output_target(plan, options.output_path, store.location, options.force)
    reason = check_input_unchanged(header) or changed_sql_file(header)
    if reason:
        raise StalePlanError(f"plan {header.plan_id} is stale: {reason}", hint="re-plan with `batchor plan SPEC`")
    return options


def check_budget(plan: CompiledPlan, max_cost: float | None, carried: float = 0.0) -> None:
    """Refuse before any call when the plan's upper bound passes the budget: the lower of
    --max-cost and the spec's `limits.max_cost_usd`, less what the job's unfinished earlier runs
    spent (`carried`: a budget covers a job across its resumes)."""
    max_cost, source = plan_budget(max_cost, plan.header)
    if max_cost is None:
        return
    totals = plan.header.totals
    if totals.unpriced_models:
        raise NoPriceError(
            f"no price known for {', '.join(totals.unpriced_models)}, so {source} cannot be enforced",
            hint="add `price: {input_per_mtok: ..., output_per_mtok: ...}` to the model block",
        )
    if totals.unbounded:
        raise CostUnboundedError(
            f"step(s) {', '.join(totals.unbounded)} run once per element of a fan-out with no bound, so the plan "
            f"has no upper-bound cost and {source} cannot be enforced; nothing was sent",
            hint="set `max_fanout:` on the fan-out SQL step, or `maxItems` on the list it unnests "
            "in the upstream step's schema",
            plan=plan,
        )
    if carried > 0 and totals.cost_upper + carried > max_cost + 1e-12:
        raise CostLimitError(
            f"this job's earlier runs spent {money(carried)} of {source} {money(max_cost)} (a budget covers the "
            f"job across its resumes), and the rest may cost up to {money(totals.cost_upper)}; nothing was sent",
            hint=raise_hint(source),
            plan=plan,
        )
    if totals.cost_upper > max_cost + 1e-12:
        raise CostLimitError(
            f"the plan may cost up to {money(totals.cost_upper)} (expected {money(totals.cost_expected)}), "
            f"above {source} {money(max_cost)}; nothing was sent",
            hint=f"raise {source}, lower max_tokens, or add input.limit",
            plan=plan,
        )
