"""Renderings of a plan: the five-second text summary, markdown (PR comments, notebooks), JSON."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from batchor.humanize import money as humanize_money
from batchor.humanize import plural
from batchor.plan.budget import budget_origin, plan_budget
from batchor.plan.fallback_cost import fallback_upper
from batchor.plan.model import PROJECTED
from batchor.plan.prices import ModelPrice
from batchor.plan.trust import powers, powers_lines
from batchor.plan.variants import variant_reason
from batchor.schema.feedback import FEEDBACK_TOKENS

if TYPE_CHECKING:
    from batchor.plan.plan_file import CompiledPlan


def money(value: float) -> str:
    """The plan's money: 4 decimals under a dollar ($0.0000 for nothing), else the shared formatter
    (which never rounds a sub-cent amount to zero nor prints 1e-05)."""
    return "$0.0000" if value == 0 else humanize_money(value)


def plan_dict(plan: "CompiledPlan") -> dict[str, Any]:
    h = plan.header
    return {
        "plan_id": h.plan_id,
        "plan_file": str(plan.saved_path) if plan.saved_path else None,
        "name": h.name,
        "rows": h.totals.rows,
        "totals": h.totals.model_dump(),
        "cost_upper_includes_reasks": False,
        "cost_upper_all_attempts": reask_upper(h),
        "input": {"files": h.input.files, "fingerprint": h.input.fingerprint},
        "output": h.output.model_dump(),
        "powers": powers(h),
        "steps": [
            {
                "name": s.name,
                "provider": s.provider,
                "model": s.model,
                "mode": s.mode,
                "mode_note": s.mode_note,
                "depends_on": s.depends_on,
                "price": s.price,
                "token_count_exact": s.token_count_exact,
                "schema_notes": s.schema_notes,
                **_estimate_sources(s),
                **s.counts.model_dump(),
            }
            for s in h.steps
        ],
    }


def plan_text(plan: "CompiledPlan", max_cost: float | None = None, output: str | Path | None = None) -> str:
    """The five-second summary: rows, work, cache, tokens, cost, budget; then each step, then where
    the output (`output`: where `--output` sends it), the state and the saved plan are."""
    lines = _total_lines(plan, max_cost)
    for step in plan.header.steps:
        lines += _step_lines(step)
    return "\n".join(lines + _place_lines(plan, output))


def _total_lines(plan: "CompiledPlan", max_cost: float | None) -> list[str]:
    h, t = plan.header, plan.header.totals
    lines = [
        f"Plan {h.plan_id} for '{h.name}'" + (" (mock provider)" if h.mocked else ""),
        f"  rows        {t.rows:,}",
        f"  requests    {_to_run(t, split=False)}{_sharing(plan)}, {plural(t.cached, 'row')} cached, "
        f"{t.skipped:,} skipped" + _failed_earlier(t),
    ]
    approx = "~" if t.estimates else ""
    lines.append(
        f"  tokens      {approx}{t.input_tokens:,} in, ~{t.output_tokens_expected:,} out expected "
        f"(<= {t.output_tokens_upper:,})"
    )
    if t.unbounded:
        lines.append(
            f"  cost        {money(t.cost_expected)} expected, NO UPPER BOUND: {', '.join(t.unbounded)} run "
            "once per element of a fan-out without `max_fanout`"
        )
    else:
        lines.append(
            f"  cost        {money(t.cost_expected)} expected, {money(t.cost_upper)} at most "
            "(one attempt per request)" + (", priced steps only" if t.unpriced_models else "")
        )
        lines.append(f"  re-asks     {_reask_note(h)}")
    spec_cap = h.limits.max_cost_usd
    limit, _ = plan_budget(max_cost, h)
    if limit is not None:
        verdict = (
            "cannot be checked: no upper bound"
            if t.unbounded
            else ("within budget" if t.cost_upper <= limit else "ABOVE budget")
        )
        lines.append(f"  budget      {money(limit)} ({verdict}; {budget_origin(max_cost, spec_cap)})")
    if t.unpriced_models:
        lines.append(f"  no price    {', '.join(t.unpriced_models)} (add `price:` to the model block)")
    return lines


def _step_lines(s: Any) -> list[str]:
    c = s.counts
    est = f" ({c.projected:,} projected: upstream answers pending)" if c.projected else ""
    if c.unbounded and not s.local:
        est = f" ({c.projected:,}+ projected: a fan-out above has no max_fanout, so no upper bound)"
    if s.fan_out:
        bound = f"at most {s.max_fanout:,} per row" if s.max_fanout else "unbounded"
        est += f" fan-out: {c.elements:,} elements known ({bound})"
    mode = f"{s.mode}, {s.mode_note}" if s.mode_note else s.mode
    lines = [
        f"  step {s.name}: {s.provider}:{s.model} [{mode}] {_to_run(c)}, {plural(c.cached, 'row')} cached, "
        f"{c.skipped:,} skipped, {_step_cost(s)}{est}"
    ]
    if c.too_long:
        lines.append(
            f"    note: {c.too_long:,} request(s) exceed the {s.context_window:,}-token context window: "
            "those rows will fail without a call"
        )
    if c.attachment_problems:
        lines.append(
            f"    note: {c.attachment_problems:,} row(s) have attachments that cannot be sent: they will "
            "fail without a call, e.g. " + "; ".join(c.attachment_examples)
        )
    if c.failed_earlier:
        lines.append(
            f"    note: {c.failed_earlier:,} failed earlier, not retried (invalid request, refusal or "
            "context too long); --retry-failed or --refresh STEP sends them again"
        )
    if not s.local:
        lines.append(f"    estimate: {_estimate_line(s)}")
    if s.fallbacks:
        lines.append(f"    fallback: {fallback_line(s)}")
    if s.escalation is not None:
        lines.append(f"    escalate: {escalate_line(s)}")
    return lines + [f"    note: {n}" for n in s.schema_notes]


def _place_lines(plan: "CompiledPlan", output: str | Path | None = None) -> list[str]:
    h, lines = plan.header, []
    if output is not None:
        lines.append(f"  output      {output} (--output)")
    elif h.output.variant:
        lines.append(
            f"  output      {h.output.path} ({variant_reason(tuple(h.output.variant))}: "
            f"the spec's {h.output.spec_path} is left as it is)"
        )
    if h.state_location:
        lines.append(f"  state       {h.state_location}" + (f" ({h.state_source})" if h.state_source else ""))
    lines += powers_lines(h, output)
    if plan.saved_path:
        lines.append(f"  saved       {plan.saved_path}")
    return lines


def fallback_line(step: Any) -> str:
    """The fallback models, what they add at most, and the share expected to fall back."""
    models = ", ".join(f"{f.provider}:{f.model}" for f in step.fallbacks)
    share = (
        f"{step.fallback_share:.1%} expected to fall back, as measured in {step.fallback_share_source}"
        if step.fallback_share is not None
        else "not measured yet (no earlier run or pilot): none expected"
    )
    most = money(fallback_upper(step))
    return f"{models} on {', '.join(step.fallback_on)}; up to {most} if every row falls back ({share})"


def escalate_line(step: Any) -> str:
    """The stronger model, its condition, and the share of rows expected to escalate."""
    e = step.escalation
    share = (
        f"{step.escalate_share:.1%} expected to escalate, as measured in {step.escalate_share_source}; "
        "the upper bound counts every row"
        if step.escalate_share is not None
        else "not measured yet (no earlier run or pilot): priced as if every row is"
    )
    return f"to {e.provider}:{e.model} when {step.escalate_when} ({share})"


def unpriced(step: Any) -> bool:
    """An LLM step whose model has no price: its cost is unknown, never shown as $0."""
    return step.price is None and not step.local


def _step_cost(step: Any) -> str:
    if unpriced(step):
        return "cost unknown (no price)"
    return f"{money(step.counts.cost_expected)} (<= {money(step.counts.cost_upper)})"


def _estimate_sources(step: Any) -> dict[str, Any]:
    """Where a step's expected tokens come from (see plan/estimate.py)."""
    return {
        "expected_output_tokens_per_request": step.expected_output_tokens,
        "output_source": step.output_source,
        "input_source": step.input_source,
        "input_factor": step.input_factor,
        "reask_input_tokens": step.reask_input_tokens,
        "length_key": step.length_key,
        "output_error_90": step.output_error,
        "output_error_90_ends": list(step.output_error_ends) if step.output_error_ends else None,
        "answer_share": step.answer_share,
        "input_length_fit": step.length_fit.model_dump() if step.length_fit is not None else None,
    }


FEW = 0.10
"""A measured figure whose 90 % error is above this is flagged `few answers` (`few rows`)."""


def _estimate_line(step: Any) -> str:
    """'~42 output tokens per request (history: 1,204 answers, +-2 %); input tokens exact', with
    `few answers` where the measured mean may be more than FEW off (a pilot measures more)."""
    c = step.counts
    when = f"; when: {c.when_source}{_share_error(c.when_ran, c.when_evaluated)}" if c.when_source else ""
    error = _error_text(step.output_error, "answers", "pilot:" in step.output_source, step.output_error_ends)
    return (
        f"~{step.expected_output_tokens:,} output tokens per request ({step.output_source}{error}); "
        f"input tokens {_input_text(step)}{when}"
    )


def _input_text(step: Any) -> str:
    """'exact', or where the provider bills an exact count otherwise: 'counted 12,000, provider
    bills ~4,800 (x0.40 from 50 answers)'."""
    ratio = getattr(step, "input_ratio", 1.0)
    if not step.token_count_exact or ratio == 1.0:
        return step.input_source or "estimate"
    billed = step.counts.input_tokens
    answers = step.input_source.rpartition("(")[2].rstrip(")")
    return f"counted {round(billed / ratio):,}, provider bills ~{billed:,} (x{ratio:.2f} from {answers})"


def _error_text(error: float | None, unit: str, piloted: bool = False, ends: tuple[float, float] | None = None) -> str:
    """', +-2 %' or, where skewed answers move it, ', -8 % / +12 %' (the 90 % ends)."""
    if error is None:
        return ""
    pilot = "a larger pilot" if piloted else "a pilot"  # after one, more of the same is the advice
    few = f": few {unit}, {pilot} (--pilot N) measures more" if error > FEW else ""
    return f", {spread_text(ends[0], ends[1]) if ends else f'+-{error:.0%}'}{few}"


def spread_text(below: float, above: float) -> str:
    """A 90 % interval as shares of the estimate: '+-5%' when its ends round alike, else '-8% / +12%'."""
    low, high = f"{below:.0%}", f"{above:.0%}"
    return f"+-{low}" if low == high else f"-{low} / +{high}"


def _share_error(ran: int, evaluated: int) -> str:
    """The 90 % binomial error of a `when:` share measured on `evaluated` rows, relative."""
    if not evaluated or not ran:
        return ""
    p = ran / evaluated
    return _error_text(1.645 * math.sqrt(p * (1 - p) / evaluated) / p, "rows")


def reask_upper(header: Any) -> float:
    """The upper bound if every request used all its attempts (each re-ask at the worst case,
    with the rejected answer and the feedback it sends back as input)."""
    attempts = header.limits.max_attempts
    factor = 1.0
    if header.limits.on_truncation == "reask":  # a re-ask may send up to truncation_max_tokens
        ceiling = header.limits.truncation_max_tokens
        factor = max([ceiling / s.max_tokens if ceiling else 4.0 for s in header.steps] + [1.0])
    feedback = sum(feedback_allowance(s, factor) for s in header.steps)
    return (header.totals.cost_upper * factor + feedback) * attempts - feedback


def feedback_allowance(step: Any, factor: float = 1.0) -> float:
    """What one re-ask of every request of a structured step adds as input: the rejected answer
    (at most its max_tokens) and the feedback turn (schema/feedback.py caps its length)."""
    if step.price is None or step.schema is None:
        return 0.0
    requests = step.counts.to_run + step.counts.projected
    tokens = int(step.max_tokens * factor) + FEEDBACK_TOKENS
    price = ModelPrice.from_dict(step.price)
    return requests * price.cost(int(tokens * step.token_upper_factor), 0, batch=step.mode == "batch")


def _reask_note(header: Any) -> str:
    attempts = header.limits.max_attempts
    if attempts <= 1:
        return "none (max_attempts 1): the upper bound is the most the run can spend"
    return (
        f"a rejected or failed answer is asked again, up to max_attempts {attempts}; every attempt is paid "
        f"and counted against the budget (if every request used them all: {money(reask_upper(header))})"
    )


def plan_markdown(plan: "CompiledPlan") -> str:
    h, t = plan.header, plan.header.totals
    rows = [
        "| step | model | requests to run | of which changed | rows cached | rows skipped | cost (expected) "
        "| cost (at most) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for s in h.steps:
        c = s.counts
        changed = f"{c.changed:,} ({causes_text(c.changed_by)})" if c.changed_by else f"{c.changed:,}"
        rows.append(
            f"| {s.name} | {s.provider}:{s.model} | {c.to_run:,} | {changed} | {c.cached:,} "
            f"| {c.skipped:,} | "
            f"{'no price' if unpriced(s) else money(c.cost_expected)} | {_upper(s)} |"
        )
    head = (
        f"### batchor plan `{h.plan_id}` — {h.name}\n\n{t.rows:,} rows, **{t.to_run:,} requests to run**, "
        f"{plural(t.cached, 'row')} cached. Expected cost **{money(t.cost_expected)}** ({_at_most(t)}).\n"
    )
    return head + "\n" + "\n".join(rows) + "\n"


def _to_run(counts: Any, split: bool = True) -> str:
    """'N to run', with how many changed since the spec last ran (and, per step, how many are new)."""
    if not counts.changed:
        return f"{counts.to_run:,} to run"
    new = f"{counts.to_run - counts.changed:,} new, " if split else ""
    causes = getattr(counts, "changed_by", None) or {}
    why = ": " + causes_text(causes) if split and causes else ""
    return f"{counts.to_run:,} to run ({new}{counts.changed:,} changed{why})"


def causes_text(causes: dict[str, int]) -> str:
    """'template 6, model 4 (projected)': what changed, and for how many rows."""
    parts = []
    for cause, n in causes.items():
        projected = cause.endswith(PROJECTED)
        parts.append(f"{cause.removesuffix(PROJECTED)} {n:,}" + (PROJECTED if projected else ""))
    return ", ".join(parts)


def _failed_earlier(totals: Any) -> str:
    return f", {totals.failed_earlier:,} failed earlier, not retried" if totals.failed_earlier else ""


def shared_rows(plan: "CompiledPlan") -> int:
    """Rows whose request is identical to another row's (same text): answered once, shared.

    Per LLM step, the rows that need a request minus the unique requests to run, so 300 rows with
    24 duplicate texts need 276 requests. Cached rows and projected rows (not rendered yet) do not
    count."""
    shared = 0
    for step in plan.header.steps:
        c = step.counts
        if not step.local:
            shared += max(0, c.rows - c.skipped - c.cached - c.to_run - c.too_long - c.failed_earlier)
    return shared


def _sharing(plan: "CompiledPlan") -> str:
    shared = shared_rows(plan)
    return f" ({plural(shared, 'row', 'share')} a request with another row)" if shared else ""


def _upper(step: Any) -> str:
    if unpriced(step):
        return "no price"
    return "unbounded" if step.counts.unbounded and not step.local else money(step.counts.cost_upper)


def _at_most(totals: Any) -> str:
    if totals.unbounded:
        return "no upper bound: a fan-out has no `max_fanout`"
    unpriced_note = f"; no price for {', '.join(totals.unpriced_models)}" if totals.unpriced_models else ""
    return f"at most {money(totals.cost_upper)}{unpriced_note}"
