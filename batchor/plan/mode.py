"""Plan stage: which API each step uses, realtime or the provider's Batch API (half price).

`auto` is settled at plan time, once the number of requests to run is known, so the plan prices
every step at the rate of the mode it will really use and says why it chose it.
"""

from __future__ import annotations

import re

from batchor.errors import CloudPathMissingError, SpecError
from batchor.plan.model import StepPlan
from batchor.providers import ProviderInfo
from batchor.providers.clouds import batch_min_requests
from batchor.providers.facts import provider_facts

BATCH_WINDOW_S = 24 * 3600  # every supported Batch API promises results within 24 h
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str, where: str = "deadline") -> float:
    """Seconds in `90s`, `30m`, `2h`, `1d` (or a bare number of seconds)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text or "")
    if not match:
        raise SpecError(f"{where}: '{text}' is not a duration", hint="write e.g. 90s, 30m, 2h or 1d")
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


def initial_mode(
    requested: str,
    info: ProviderInfo,
    deadline: str | None,
    where: str,
    flex: bool = False,
    batch_missing: str | None = None,
) -> tuple[str, str | None]:
    """The mode before rows are counted: `auto` stays open unless something already rules batch
    out (a deadline shorter than the batch window: flex where the model has it (`flex`), else
    realtime; a Batch API batchor has no path for on this cloud, `batch_missing`: realtime)."""
    if batch_missing and requested == "batch":
        raise CloudPathMissingError(
            f"{where}: mode batch: {batch_missing}", hint="use `mode: realtime` (or `auto`, which then runs realtime)"
        )
    if batch_missing and requested == "auto":
        return "realtime", f"auto: {batch_missing.split(':')[0]}"
    if requested == "flex" and provider_facts(info.name).offline:
        return "realtime", "mock provider: the offline rehearsal answers in realtime"
    if requested == "batch" and not info.batch:
        if provider_facts(info.name).offline:
            return "realtime", "mock provider: the offline rehearsal answers in realtime"
        raise SpecError(
            f"{where}: provider '{info.name}' has no Batch API",
            hint="use `mode: realtime`, or a provider with a Batch API (openai, anthropic, gemini)",
        )
    if requested != "auto":
        return requested, None
    if not info.batch:
        return "realtime", f"auto: {info.name} has no Batch API"
    if deadline is not None and parse_duration(deadline, f"{where}.deadline") < BATCH_WINDOW_S:
        if flex:
            return "flex", f"auto: deadline {deadline} is shorter than the 24 h batch window: flex processing"
        return "realtime", f"auto: deadline {deadline} is shorter than the 24 h batch window"
    return "auto", None


def settle_mode(step: StepPlan, to_run: int, threshold: int) -> StepPlan:
    """Resolve `auto` from the count of requests to run (projected for dependent steps). A step
    with fewer requests than its provider's batch jobs take (Bedrock: 100 records) runs realtime,
    `batch` as well as `auto`: the provider would refuse the job, and the rows still get answers."""
    minimum = batch_min_requests(step.provider, step.provider_options)
    too_few = f"fewer than the {minimum:,} records a {step.provider} batch job takes"
    if step.mode == "batch" and 0 < to_run < minimum:
        note = f"batch: {to_run:,} requests, {too_few}: realtime"
        return step.model_copy(update={"mode": "realtime", "mode_note": note})
    if step.mode != "auto":
        return step
    if to_run >= max(threshold, minimum):
        mode, note = "batch", f"auto: {to_run:,} requests >= batch_threshold {threshold:,}"
    elif to_run >= threshold:
        mode, note = "realtime", f"auto: {to_run:,} requests, {too_few}"
    else:
        mode, note = "realtime", f"auto: {to_run:,} requests < batch_threshold {threshold:,}"
    return step.model_copy(update={"mode": mode, "mode_note": note})
