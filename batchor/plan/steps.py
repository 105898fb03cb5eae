"""Resolve each spec step into a pinned `StepPlan`: model, params, schema as sent, price.

This is the part of planning that needs no input rows, so `validate` runs it too.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from batchor.errors import (
    BatchorError,
    FlexUnsupportedError,
    Problems,
    SchemaError,
    SpecError,
    problems_of,
    raise_problems,
)
from batchor.fingerprint import request_prefix
from batchor.plan.attachments import input_folder
from batchor.plan.context import context_window
from batchor.plan.context_cache import check_explicit
from batchor.plan.embed_step import embed_step_plan
from batchor.plan.endpoint import check_connection, key_identity, step_endpoint
from batchor.plan.escalate import with_escalation
from batchor.plan.fanout_rows import assign_grains
from batchor.plan.gather import check_gather, gather_names, gathered_steps
from batchor.plan.known_models import check_model
from batchor.plan.mode import initial_mode
from batchor.plan.model import StepPlan
from batchor.plan.model_block import Overrides as Overrides
from batchor.plan.model_block import Switch, at, check_model_block, effective_model
from batchor.plan.prices import lookup_price
from batchor.plan.prompt_cache import check_ttl, with_prompt_cache
from batchor.plan.split import split_step_plan
from batchor.plan.sql_files import referenced_files
from batchor.plan.sql_step import sql_step_plan
from batchor.plan.step_kinds import as_reduce, as_resolve, reduce_deps, resolve_deps
from batchor.plan.tokens import get_counter
from batchor.providers import MOCK, provider_info
from batchor.providers.clouds import batch_missing, priced_as
from batchor.providers.facts import provider_facts
from batchor.providers.keys import default_key_env
from batchor.providers.schema_adapt import adapt_schema
from batchor.schema.answer_length import expected_answer_tokens
from batchor.schema.core import check_schema
from batchor.schema.tools import expected_call_tokens
from batchor.spec.load import LoadedSpec
from batchor.spec.model import (
    CanonicalPrompt,
    EmbedStep,
    LLMStep,
    ModelSpec,
    ReduceStep,
    ResolveStep,
    SplitStep,
    SqlStep,
)
from batchor.spec.templates import StepTemplates, compile_step, make_environment, templates_folder


def resolve_steps(
    loaded: LoadedSpec, overrides: Overrides, found: Problems | None = None
) -> tuple[list[StepPlan], dict[str, StepTemplates]]:
    """Each step resolved; raises every problem found. With `found`, problems are added to it
    instead and the steps that could be resolved are returned (`validate` goes on to check their
    templates, columns and checks, so independent mistakes come out in one pass)."""
    spec = loaded.spec
    env = make_environment(templates_folder(loaded.base_dir, loaded.spec.templates))
    names = set(spec.steps)
    templates: dict[str, StepTemplates] = {}
    plans: list[StepPlan] = []
    collect = found is not None
    found = found if found is not None else Problems()  # every step is checked: one pass reports all
    checked: set[tuple[str, ...]] = set()  # model blocks already checked (the job's, shared by steps)
    for name, step in spec.steps.items():
        with found.check():
            if isinstance(step, SqlStep):
                plan = sql_step_plan(name, step.sql, step.depends_on, names, step.fan_out, step.max_fanout)
                plans.append(plan.model_copy(update={"sql_files": referenced_files(step.sql, loaded.base_dir)}))
                continue
            if isinstance(step, EmbedStep):
                templates[name] = _compile(
                    loaded, env, name, None, step.embed, step.when, names - {name}, prompt_key="embed"
                )
                plans.append(_embed_plan(loaded, name, step, templates[name], overrides))
                continue
            if isinstance(step, SplitStep):
                templates[name] = _compile(
                    loaded, env, name, None, step.split, None, names - {name}, prompt_key="split"
                )
                plans.append(split_step_plan(loaded.spec, name, step, templates[name].step_refs))
                continue
            known = names - {name} | _own_names(step) | gather_names(step)
            compiled = _compile(loaded, env, name, step.system, step.prompt, step.when, known, step.attachments)
            templates[name] = compiled
            compiled.step_refs.difference_update({"group", "gather", "pair"} - names)  # groups, neighbours: not steps
            read = set(step.depends_on) | compiled.step_refs | reduce_deps(name, step, names) | set(step.gather)
            deps = sorted(read | _resolve_deps(loaded, env, name, step, names))
            model = effective_model(spec.model, step.model, overrides)
            with found.check():
                check_model_block(loaded, name, model, overrides, checked)
            mode = overrides.mode or step.mode or spec.limits.mode
            plan = _step_plan(loaded, name, model, deps, overrides, mode)
            if model.fallback:
                plan = _with_fallbacks(loaded, plan, model, deps, overrides, mode)
            if step.escalate is not None:
                plan = with_escalation(
                    plan, step.escalate.when, _other(loaded, plan, model, step.escalate.to, overrides)
                )
            check_ttl(plan.provider, plan.model, spec.cache.ttl, at(loaded, ("cache", "ttl")))
            plan = plan.model_copy(update={"gather": gathered_steps(name, step, names)})
            check_explicit(plan.provider, plan.mode, spec.cache.explicit, at(loaded, ("cache", "explicit")))
            plan = with_prompt_cache(as_reduce(plan, step), compiled, spec.limits, spec.cache)
            plans.append(as_resolve(plan, step))
    if not collect:
        found.raise_all()
        _check_acyclic(plans)
        return check_gather(assign_grains(plans)), templates
    plans = _with_their_steps(plans)
    with found.check():
        _check_acyclic(plans)
        return check_gather(assign_grains(plans)), templates
    return plans, templates


def _own_names(step: Any) -> set[str]:
    """Names a step's templates read that are not steps: a reduce step's `group`, a resolve step's `pair`."""
    return {"group"} if isinstance(step, ReduceStep) else {"pair"} if isinstance(step, ResolveStep) else set()


def _resolve_deps(loaded: LoadedSpec, env: Any, name: str, step: Any, names: set[str]) -> set[str]:
    """A resolve step's other reads; its canonical prompt is compiled here so a mistake in it
    is found when planning."""
    deps = resolve_deps(name, step, names)
    canonical = getattr(getattr(step, "resolve", None), "canonical", None)
    if isinstance(canonical, CanonicalPrompt):
        known = names - {name} | {"cluster"}
        _compile(
            loaded, env, name, canonical.system, canonical.prompt, None, known, prompt_key="resolve.canonical.prompt"
        )
    return deps


def _compile(loaded: LoadedSpec, env: Any, *args: Any, **kwargs: Any) -> StepTemplates:
    """`compile_step`, each template problem at the spec's `file:line` of the line it names."""
    try:
        return compile_step(env, *args, **kwargs)
    except BatchorError as exc:
        raise_problems([_in_text(loaded, problem) for problem in problems_of(exc)])
        raise


def _in_text(loaded: LoadedSpec, problem: BatchorError) -> BatchorError:
    path, line = problem.details.get("path"), problem.details.get("line")
    if path is None or line is None:
        return problem
    return type(problem)(f"{loaded.where_in_text(path, line)}: {problem.message}", hint=problem.hint)


def _with_their_steps(plans: list[StepPlan]) -> list[StepPlan]:
    """The steps whose every dependency was resolved too (the others cannot be checked yet)."""
    kept = list(plans)
    while True:
        names = {p.name for p in kept}
        complete = [p for p in kept if set(p.depends_on) <= names]
        if len(complete) == len(kept):
            return kept
        kept = complete


def _embed_plan(
    loaded: LoadedSpec, name: str, step: EmbedStep, compiled: StepTemplates, overrides: Overrides
) -> StepPlan:
    """An embedding step: `--model` names an LLM, so it leaves the step's embedding model alone."""
    model = effective_model(loaded.spec.model, step.model, Overrides(mock=overrides.mock))
    block = ("steps", name, "model") if step.model is not None else ("model",)
    check_connection(model, lambda key: at(loaded, (*block, key)))
    mode = overrides.mode or step.mode or loaded.spec.limits.mode
    deps = sorted(set(step.depends_on) | compiled.step_refs)
    return embed_step_plan(loaded, name, step, model, deps, overrides.mock, mode)


def _other(loaded: LoadedSpec, plan: StepPlan, model: ModelSpec, ref: str, overrides: Overrides) -> StepPlan:
    """The step's plan for another model (`escalate.to`), checked like a fallback model."""
    where = at(loaded, ("steps", plan.name, "escalate", "to"))
    provider, _, name = ref.partition(":")
    check_model(provider, name, custom=False, priced=False, where=where)
    base = model.model_copy(update={"fallback": [], "fallback_on": []})
    other = effective_model(base, Switch(provider, name), Overrides(mock=overrides.mock))
    check_connection(other, partial(_beside, where))
    return _step_plan(loaded, plan.name, other, plan.depends_on, overrides, plan.mode)


def _with_fallbacks(
    loaded: LoadedSpec, plan: StepPlan, model: ModelSpec, deps: list[str], overrides: Overrides, mode: str
) -> StepPlan:
    """The step with its fallback models pinned: each a whole step plan of its own (price, key
    prefix, client settings), so a fallback answer has its own model's request key."""
    found, plans = Problems(), []
    base = model.model_copy(update={"fallback": [], "fallback_on": []})
    for index, ref in enumerate(model.fallback):
        where = f"{at(loaded, ('steps', plan.name, 'model', 'fallback'))}[{index}]"
        provider, _, name = ref.partition(":")
        with found.check():
            check_model(provider, name, custom=False, priced=False, where=where)
            other = effective_model(base, Switch(provider, name), Overrides(mock=overrides.mock))
            check_connection(other, partial(_beside, where))
            plans.append(_step_plan(loaded, plan.name, other, deps, overrides, mode))
    found.raise_all()
    return plan.model_copy(update={"fallbacks": plans, "fallback_on": list(model.fallback_on)})


def _beside(where: str, key: str) -> str:
    return f"{where}: {key}"


def _step_plan(
    loaded: LoadedSpec, name: str, model: ModelSpec, deps: list[str], overrides: Overrides, mode: str
) -> StepPlan:
    spec = loaded.spec
    step = spec.steps[name]
    assert isinstance(step, LLMStep), "SQL and embedding steps are planned by plan/sql_step.py, plan/embed_step.py"
    provider = MOCK if overrides.mock else model.provider
    info = provider_info(provider)
    schema = loaded.schemas[name]
    params = dict(model.params)
    params.setdefault("max_tokens", spec.limits.max_output_tokens)
    max_tokens = int(params["max_tokens"])
    sent_schema, strict, notes = None, False, []
    tools = loaded.tools.get(name, [])
    if schema is not None and not tools:  # a tool step's schema is its calls': each tool's was checked
        _located_schema_check(loaded, schema, f"steps.{name}.output.schema")
        adapted = adapt_schema(schema, provider)
        sent_schema, strict, notes = adapted.schema, adapted.strict, list(adapted.notes)
    priced_provider, priced_model = priced_as(provider, model.name, model.options)
    price = (
        None
        if overrides.mock
        else lookup_price(
            priced_provider, priced_model, override=model.price.model_dump(exclude_none=True) if model.price else None
        )
    )
    if overrides.mock:
        price = lookup_price(MOCK, model.name)
    counter = get_counter(priced_provider, priced_model)
    endpoint = step_endpoint(provider, model.base_url, model.options)
    key_params = {**params, "_api": model.api or "chat", "_strict": strict}
    if "structured" in model.options:  # changes what is sent; connection options do not
        key_params["_structured"] = model.options["structured"]
    if tools:  # the definitions are sent with every request: a change asks again
        key_params.update(_tools=[vars(t) for t in tools], _tool_choice=step.tool_choice)
    has_flex = provider_facts(provider).flex and price is not None and price.has_flex
    if params.get("service_tier") == "flex" and mode != "batch":  # flex asked for in the params: priced as flex
        mode = "flex"
    mode, mode_note = initial_mode(
        mode,
        info,
        step.deadline or spec.limits.deadline,
        f"steps.{name}",
        has_flex,
        batch_missing(model.provider, model.options),  # the real run's, also under --mock
    )
    if mode == "flex":
        check_flex(provider, model.name, has_flex, f"{at(loaded, ('steps', name, 'mode'))}")
    return StepPlan(
        name=name,
        provider=provider,
        model=model.name,
        api=model.api,
        base_url=model.base_url,
        api_key_env=model.api_key_env or default_key_env(provider, model.options),
        provider_options=dict(model.options),
        params=params,
        schema=schema,
        sent_schema=sent_schema,
        strict=strict,
        schema_notes=notes,
        system=step.system,
        prompt=step.prompt,
        when=step.when,
        allow_empty=step.allow_empty,
        tools=tuple(tools),
        tool_choice=step.tool_choice if tools else None,
        depends_on=deps,
        mode="realtime" if mode == "flex" else mode,
        mode_note=mode_note,
        service_tier="flex" if mode == "flex" else None,
        flex_fallback=mode == "flex" and spec.limits.flex_fallback,
        price=price.to_dict() if price else None,
        token_count_exact=counter.exact and not step.attachments and not tools,  # tools: the definitions' estimate
        token_upper_factor=counter.upper_factor,
        max_tokens=max_tokens,
        context_window=context_window(priced_model, model.context_window),
        expected_output_tokens=min(
            max_tokens, expected_call_tokens(tools) if tools else expected_answer_tokens(schema)
        ),
        endpoint=endpoint,
        key_prefix=request_prefix(key_identity(provider, endpoint), model.name, key_params, sent_schema),
        **_attachment_fields(loaded, step, model),
    )


def _located_schema_check(loaded: LoadedSpec, schema: dict[str, Any], where: str) -> None:
    """`check_schema`, its problem at the `file:line` of the schema key it names."""
    try:
        check_schema(schema, where=where)
    except SchemaError as exc:
        dotted = exc.message.split(": ", 1)[0]
        path = [int(i) if i else key for key, i in re.findall(r"\.?([^.\[\]]+)|\[(\d+)\]", dotted)]
        raise type(exc)(f"{loaded.where(*path)}: {exc.message}", hint=exc.hint) from None


def check_flex(provider: str, model: str, has_flex: bool, where: str) -> None:
    """`mode: flex` needs OpenAI's flex tier for the model (the price table lists which have it)."""
    if has_flex:
        return
    raise FlexUnsupportedError(
        f"{where}: flex processing is not offered for {provider}:{model}",
        hint="flex is OpenAI's tier for models such as o3, o4-mini and the gpt-5 family; use `mode: batch` "
        "for half price on any provider, or `mode: realtime`",
    )


def _attachment_fields(loaded: LoadedSpec, step: LLMStep, model: ModelSpec) -> dict[str, Any]:
    """A step's attachment settings, pinned in the plan (nothing for a step without attachments)."""
    if not step.attachments:
        return {}
    folder = input_folder(loaded.base_dir, loaded.spec.input.path)
    return {
        "attachments": list(step.attachments),
        "attachments_folder": str(folder),
        "media_rules": model.provider,
        "pdf_text": step.pdf == "text",
    }


def _check_acyclic(plans: list[StepPlan]) -> None:
    deps = {p.name: set(p.depends_on) for p in plans}
    visiting: set[str] = set()
    done: set[str] = set()

    def visit(node: str, trail: list[str]) -> None:
        if node in done:
            return
        if node in visiting:
            cycle = " -> ".join(trail[trail.index(node) :] + [node])
            raise SpecError(f"steps: dependency cycle {cycle}", hint="a step can only use steps before it")
        visiting.add(node)
        for dep in deps[node]:
            visit(dep, trail + [node])
        visiting.discard(node)
        done.add(node)

    for name in deps:
        visit(name, [])
