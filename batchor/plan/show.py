"""Plan stage, read side: everything a plan holds, as data a person (or a script) can read.

`plan_view` is what `batchor show` prints: per step the counts, the cost and where its price
comes from, the pinned model, params and schema, and on request sample requests exactly as the
adapter will send them (the messages pinned in the plan, through `llm_request` and the adapter's
own `to_body`).
"""

from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING, Any

from batchor.plan.model import StepPlan, req_column
from batchor.plan.request import llm_request
from batchor.plan.step_kind import StepKind
from batchor.providers.preview import body_kind, sent_body
from batchor.spec.inputs import ROW_KEY

if TYPE_CHECKING:
    from batchor.plan.plan_file import CompiledPlan


def plan_view(plan: "CompiledPlan", prompts: int = 0) -> dict[str, Any]:
    """The whole plan as plain data; `prompts` sample requests per LLM step."""
    h = plan.header
    return {
        "plan_id": h.plan_id,
        "name": h.name,
        "created_at": h.created_at,
        "batchor_version": h.batchor_version,
        "spec": h.spec_source,
        "plan_file": str(plan.saved_path) if plan.saved_path else None,
        "state": h.state_location,
        "state_source": h.state_source,
        "mocked": h.mocked,
        "input": h.input.model_dump(),
        "output": h.output.model_dump(),
        "totals": h.totals.model_dump(),
        "limits": h.limits.model_dump(mode="json"),
        "refresh": h.refresh,
        "retry_failed": h.retry_failed,
        "steps": [step_view(plan, s, prompts) for s in h.steps],
    }


def step_view(plan: "CompiledPlan", step: StepPlan, prompts: int) -> dict[str, Any]:
    view: dict[str, Any] = {
        "name": step.name,
        "kind": StepKind.SQL.value if step.local else StepKind.LLM.value,
        "depends_on": step.depends_on,
        "counts": step.counts.model_dump(),
    }
    if step.local:
        return {**view, "sql": step.prompt, "fan_out": step.fan_out, "max_fanout": step.max_fanout}
    view.update(
        provider=step.provider,
        model=step.model,
        api=step.api,
        endpoint=step.endpoint or "official",
        mode=step.mode,
        mode_note=step.mode_note,
        service_tier=step.service_tier,
        prompt_cache=step.prompt_cache.model_dump() if step.prompt_cache else None,
        params=step.params,
        options=step.provider_options,
        price=step.price,
        cost_source=cost_source(step),
        token_count_exact=step.token_count_exact,
        token_upper_factor=step.token_upper_factor,
        max_tokens=step.max_tokens,
        context_window=step.context_window,
        system=step.system,
        prompt=step.prompt,
        when=step.when,
        schema_sent=step.sent_schema,
        strict=step.strict,
        schema_notes=step.schema_notes,
    )
    if prompts > 0:
        view["requests"] = sample_requests(plan, step, prompts)
    return view


def cost_source(step: StepPlan) -> str:
    """Where the step's price comes from, in words."""
    if step.price is None:
        return "no price: the cost is unknown (add `price:` to the model block)"
    source, as_of = step.price.get("source", ""), step.price.get("as_of", "")
    named = {"spec": "the spec's `price:`", "mock": "mock provider ($0)", "local": "self-hosted server ($0)"}
    return f"{named.get(source, source)}, as of {as_of}" if as_of else named.get(source, source)


def sample_requests(plan: "CompiledPlan", step: StepPlan, count: int) -> dict[str, Any]:
    """Up to `count` of the step's requests as sent; steps that read other steps render theirs during apply."""
    kind = body_kind(step.provider, step.api)
    if step.depends_on:
        return {
            "sent_as": kind,
            "samples": [],
            "note": f"rendered during apply, from the answers of {', '.join(step.depends_on)}",
        }
    columns = [ROW_KEY, req_column(step.name, "key"), req_column(step.name, "messages")]
    rows = (
        (row, key, body)
        for batch in plan.iter_batches(columns)
        for row, key, body in zip(*(batch.column(i).to_pylist() for i in range(3)), strict=True)
        if key is not None
    )
    samples = []
    for row_key, key, body in itertools.islice(rows, count):
        request = llm_request(step, key, tuple(json.loads(body)))
        samples.append(
            {
                "row_key": row_key,
                "request_key": key,
                "body": sent_body(
                    step.provider, request, api=step.api, strict=step.strict, options=step.provider_options
                ),
                "shared_prefix_ends": prefix_end(step, request.messages),
            }
        )
    return {"sent_as": kind, "samples": samples}


def prefix_end(step: StepPlan, messages: tuple[dict[str, Any], ...]) -> str | None:
    """The last characters of the request's shared prefix (where the cache breakpoint sits)."""
    cache = step.prompt_cache
    if cache is None:
        return None
    texts = [str(m.get("content", "")) for m in messages[: cache.messages]]
    if cache.chars and cache.messages < len(messages):
        texts.append(str(messages[cache.messages].get("content", ""))[: cache.chars])
    return "".join(texts)[-60:] or None
