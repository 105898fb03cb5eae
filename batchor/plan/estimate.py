"""Plan stage: how many tokens a step's requests will bill, and where each figure comes from.

Output tokens per request come from the answers the state already holds for the step's length
key (model, output schema or text, templates): `history: N answers` from earlier runs, `pilot: N
answers` from pilot runs; re-asked attempts are included, as they are billed. Without enough of
them, from the output schema (`heuristic`, plan/answer_length.py).

Input tokens are exact for OpenAI models (tiktoken's encodings, plan/tokens.py). Other providers
use other tokenizers: the o200k count is scaled by what the provider reported for earlier first
attempts of the same model (`calibrated: N answers`), else it stays an `estimate`, with the
upper bound at `ESTIMATE_SAFETY_FACTOR` (raised if a provider ever reported more).

An exact count is checked against the bill too: a server (a gateway, a compatible server, a
provider's own accounting) may report other input tokens than the tokenizer counts. Once earlier
answers exist (history or a pilot), the count stays `exact` only while the reported input agrees
within `AGREE`; otherwise the input is scaled by the reported / counted ratio and the plan says
"counted N, provider bills ~M (x0.40 from K answers)".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from batchor.fingerprint import canonical_json, sha256_hex
from batchor.plan import output_spread
from batchor.plan.length_fit import length_fit, source_text
from batchor.plan.model import PlanHeader, StepPlan
from batchor.plan.prompt_cache import history_key, with_cache_history
from batchor.plan.strata import reweighed
from batchor.plan.tokens import FALLBACK_ENCODING, get_counter
from batchor.state.answer_stats import (
    StepEstimate,
    input_calibration,
    other_model_counts,
    output_stats,
    when_share,
)
from batchor.state.length_stats import InputCalibration, KeyStats, OutputStats

MIN_ANSWERS = 10
"""Fewer accepted answers than this for a length key: the schema heuristic decides."""
MIN_PILOT_ANSWERS = 3
"""... unless some are a pilot's: a pilot's allowance may leave a rare step few answers, and the
user asked for them; their mean decides, and its interval (Student's t on few answers) says how
little that is."""
UPPER_MARGIN = 1.05
"""Calibrated upper bounds: the highest ratio a provider ever reported, plus this margin."""


def length_key(step: StepPlan) -> str:
    """What decides the length of a step's answers: provider, model, output schema (or text), templates."""
    identity = {
        "provider": step.provider,
        "model": step.model,
        "schema": step.schema,
        "system": step.system,
        "prompt": step.prompt,
    }
    return sha256_hex(canonical_json(identity))[:16]


def model_id(step: StepPlan) -> str:
    return f"{step.provider}:{step.model}"


def with_estimates(
    steps: list[StepPlan], state: Any, max_attempts: int = 4, reask_truncated: bool = False
) -> list[StepPlan]:
    """Each LLM step with its length key, its expected output and input per request, and their
    sources; re-asks up to `max_attempts` (the spec's limits) at the rejection shares measured,
    truncated answers among them where they are asked again (`reask_truncated`)."""
    llm = [s for s in steps if not s.local]
    keys = {s.name: length_key(s) for s in llm}
    history: dict[str, KeyStats] = {}
    calibration: dict[str, InputCalibration] = {}
    if state is not None:
        history = reweighed(output_stats(state, sorted(set(keys.values()))))  # a stratified pilot's: plan/strata.py
        calibration = input_calibration(state, sorted({model_id(s) for s in llm}))
    out = []
    for step in steps:
        if not step.local:
            key = keys[step.name]
            step = _learned_output(
                step.model_copy(update={"length_key": key}), history.get(key), max_attempts, reask_truncated
            )
            step = _calibrated_input(step, calibration.get(model_id(step)))
            step = _learned_when(step, keys, state)
            step = _learned_other_models(step, state)
        out.append(step)
    return with_cache_history(out, state)  # prompt-cache hits: their own concept (plan/prompt_cache.py)


def when_key(step: StepPlan, length_keys: dict[str, str]) -> str | None:
    """What decides how often a `when:` holds: its text and what decides the answers it reads."""
    if not step.when or not step.depends_on:
        return None
    upstream = {dep: length_keys.get(dep, dep) for dep in sorted(step.depends_on)}
    return sha256_hex(canonical_json({"when": step.when, "upstream": upstream}))[:16]


def _learned_when(step: StepPlan, length_keys: dict[str, str], state: Any) -> StepPlan:
    """A `when:` step with the share of rows its condition let run in earlier jobs (any input)."""
    key = when_key(step, length_keys)
    if key is None:
        return step
    history = list(when_share(state, key, sorted(step.depends_on))) if state is not None else []
    return step.model_copy(update={"when_key": key, "when_history": history})


def _learned_output(
    step: StepPlan, stats: KeyStats | None, max_attempts: int = 4, reask_truncated: bool = False
) -> StepPlan:
    """The measured answers' output per request and what their re-asks add. Re-asks are billed
    too: a share p1 of first asks is rejected and asked again, a share p2 of those again, up to
    `max_attempts`; each re-ask sends the planned input again (`input_factor`) plus the rejected
    answer and the feedback (`reask_input_tokens`), and answers anew."""
    total = stats.total if stats else None
    if total is None or stats is None or max(total.answers, total.first_asks) < least_answers(stats):
        return step  # (first asks: a step whose answers were all rejected learns what they cost)
    if reask_truncated:
        total = total.truncations_reasked()
    reasks = total.reasks_per_request(max_attempts)
    output = total.first_tokens_each + reasks * total.reask_tokens_each
    failing = total.reject_first * total.reject_again ** max(0, max_attempts - 1)  # rejected at every attempt
    settled = (total.first_failed / total.first_asks if total.first_asks else 0.0) + failing
    fit = length_fit(total, output, 1.0 + reasks)  # answers that grow with the input (plan/length_fit.py)
    return step.model_copy(
        update={
            "expected_output_tokens": max(1, round(output)),
            "expected_output_mean": output,
            "output_source": _source(stats) + source_text(fit),
            "length_fit": fit,
            "input_factor": 1.0 + reasks,
            "reask_input_tokens": reasks * total.reask_input_each,
            "answer_share": min(1.0, max(0.0, 1.0 - settled)),
            "output_error": mean_error(total),
            "output_error_ends": mean_ends(total),
        }
    )


def _learned_other_models(step: StepPlan, state: Any) -> StepPlan:
    """A step with fallback models or an escalation, with the share of its requests that fell back
    (of those settled) and that escalated (of those answered) in earlier runs and pilots of the same
    length key, each once enough requests measured it (MIN_ANSWERS, or MIN_PILOT_ANSWERS from a
    pilot); the expected cost prices that share at the first fallback's or the stronger model's price."""
    if not step.other_models or state is None:
        return step
    counts = other_model_counts(state, step.length_key, model_id(step))
    update: dict[str, Any] = {}
    for name, hit, of, wanted in (
        ("fallback", 0, 1, bool(step.fallbacks)),
        ("escalate", 2, 3, step.escalation is not None),
    ):
        measured = _measured_share(counts, hit, of) if wanted else None
        if measured is not None:
            update[f"{name}_share"], update[f"{name}_share_source"] = measured
    return step.model_copy(update=update) if update else step


def _measured_share(counts: Mapping[str, tuple[int, ...]], hit: int, of: int) -> tuple[float, str] | None:
    """(share, where it was measured) of `counts[kind][hit]` among `counts[kind][of]`, all kinds
    together; None below the requests a measure needs."""
    hits, total = (sum(c[i] for c in counts.values()) for i in (hit, of))
    pilot = counts.get("pilot", (0, 0, 0, 0))[of]
    if not total or total < (MIN_PILOT_ANSWERS if pilot else MIN_ANSWERS):
        return None
    parts = [
        f"{'history' if kind == 'apply' else kind}: {c[of]:,} requests" for kind, c in sorted(counts.items()) if c[of]
    ]
    return hits / total, ", ".join(parts)


def least_answers(stats: KeyStats) -> int:
    """Answers a learned mean needs: fewer when a pilot measured some (MIN_PILOT_ANSWERS)."""
    pilot = stats.by_kind.get("pilot")
    return MIN_PILOT_ANSWERS if pilot is not None and (pilot.answers or pilot.first_asks) else MIN_ANSWERS


def mean_ends(stats: OutputStats) -> tuple[float, float] | None:
    """The measured mean's 90 % error below and above it (skew-aware; plan/output_spread.py)."""
    return output_spread.mean_ends(stats)


def mean_error(stats: OutputStats) -> float | None:
    """How far the measured mean output may be off (90 %, relative): Student's t over the answers,
    widened for skewed ones (plan/output_spread.py mean_quantile)."""
    if stats.answers < 2 or stats.mean <= 0:
        return None
    return output_spread.mean_quantile(stats) * stats.stdev / stats.mean / math.sqrt(stats.answers)


def _source(stats: KeyStats | None) -> str:
    """`history: 1,204 answers`, `pilot: 50 answers`, or both when both kinds exist."""
    if stats is None:
        return "heuristic"
    parts = [
        f"{'history' if kind == 'apply' else kind}: {s.answers:,} answers"
        for kind, s in sorted(stats.by_kind.items(), key=lambda item: item[0] != "pilot")
        if s.first_asks
    ]
    return ", ".join(parts) or "heuristic"


AGREE = 0.03
"""An exact count is the bill while the provider's reported input is within this share of it."""


def _calibrated_input(step: StepPlan, calibration: InputCalibration | None) -> StepPlan:
    if step.token_count_exact:
        return _checked_exact(step, calibration)
    if get_counter(step.provider, step.model).encoding == FALLBACK_ENCODING:
        return step.model_copy(update={"input_source": "estimate (characters/4: no tokenizer vocabulary found)"})
    if calibration is None or calibration.answers < MIN_ANSWERS:
        return step.model_copy(update={"input_source": "estimate (o200k count)"})
    upper = max(step.token_upper_factor, calibration.max_ratio * UPPER_MARGIN)
    return step.model_copy(
        update={
            "input_factor": step.input_factor * calibration.ratio,
            "token_upper_factor": upper,
            "input_source": f"calibrated: {calibration.answers:,} answers",
        }
    )


def _checked_exact(step: StepPlan, calibration: InputCalibration | None) -> StepPlan:
    """An exact count, scaled to what the provider reported when earlier answers disagree with it."""
    if calibration is None or calibration.answers < MIN_ANSWERS or abs(calibration.ratio - 1.0) <= AGREE:
        return step.model_copy(update={"input_source": "exact"})
    ratio = calibration.ratio
    return step.model_copy(
        update={
            "input_factor": step.input_factor * ratio,
            "input_ratio": ratio,
            "token_upper_factor": max(step.token_upper_factor, calibration.max_ratio * UPPER_MARGIN),
            "input_source": f"counted, billed x{ratio:.2f} ({calibration.answers:,} answers)",
        }
    )


def step_estimates(header: PlanHeader) -> list[StepEstimate]:
    """The plan's per-step estimate, as stored with each run that applies it."""
    return [
        StepEstimate(
            step=s.name,
            length_key=s.length_key,
            model=model_id(s),
            requests=s.counts.to_run,
            input_tokens=s.counts.input_tokens,
            output_tokens=s.counts.output_tokens_expected,
            expected_usd=s.counts.cost_expected,
            upper_usd=s.counts.cost_upper,
            output_source=s.output_source,
            input_source=s.input_source,
            when_key=s.when_key,
            cache_key=history_key(s),
        )
        for s in header.steps
        if not s.local
    ]
