"""`batchor show PLANFILE|SPEC`: the full plan, step by step, and sample requests as they will be sent."""

from __future__ import annotations

import difflib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from batchor.cli.colour import coloured
from batchor.humanize import NOTHING, count, moment, money, per_mtok
from batchor.lazy import Deferred

if TYPE_CHECKING:
    from batchor import api, operations
else:  # the plan model loads only when `show` runs (start-up of every command)
    api, operations = Deferred("batchor.api"), Deferred("batchor.operations")


def show(
    target: Path = typer.Argument(..., help="A saved .plan file, or a spec (planned now, not saved)"),
    prompts: int = typer.Option(0, "--prompts", min=0, help="Render N sample requests per step, exactly as sent"),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output"),
    state: Optional[str] = typer.Option(None, "--state", help="State file or URL (a spec only)"),
    model: Optional[str] = typer.Option(None, "--model", help="Override the model: provider:name (a spec only)"),
    mock: bool = typer.Option(False, "--mock", help="Plan with the offline mock (a spec only)"),
    diff: int = typer.Option(0, "--diff", min=0, help="N changed rows per step: earlier vs new"),
) -> None:
    """Print everything a plan holds: per step the counts, the cost and its source, the pinned model,
    prices and params; with --prompts N, N requests per step as the provider will receive them."""
    view = operations.show(target, prompts=prompts, state=state, model=model, mock=mock, diff=diff)
    if as_json:
        sys.stdout.write(json.dumps(view, indent=2, default=str, ensure_ascii=False) + "\n")
        return
    from batchor.cli.show_table import steps_table
    from batchor.cli.tables import show as print_table

    header, _, details = view_text(view).partition("\n\n")
    typer.echo(coloured(header, sys.stdout) + "\n")
    print_table(steps_table(view))
    typer.echo("\n" + coloured(details, sys.stdout))


def _diff_lines(samples: list[dict[str, Any]]) -> list[str]:
    lines = []
    for sample in samples:
        before = json.dumps(sample["before"], indent=2, ensure_ascii=False).splitlines() if sample["before"] else []
        after = json.dumps(sample["after"], indent=2, ensure_ascii=False).splitlines()
        what = (
            f"changed row {sample['row_key']}"
            if sample["row_key"] is not None
            else "changed settings (requests rendered during apply)"
        )
        lines.append(f"  {what}" + ("" if sample["before"] else " (earlier plan file gone)"))
        lines += [f"    {line}" for line in difflib.unified_diff(before, after, "earlier", "now", lineterm="", n=1)]
    return lines


def view_text(view: dict[str, Any]) -> str:
    t = view["totals"]
    lines = [
        f"Plan {view['plan_id']} for '{view['name']}'" + (" (mock provider)" if view["mocked"] else ""),
        f"  made        {moment(view['created_at'])} by batchor {view['batchor_version']} from {view['spec']}",
        f"  state       {view['state']}" + (f" ({view['state_source']})" if view["state_source"] else ""),
        f"  input       {', '.join(view['input']['files'])} ({view['input']['rows']:,} rows, "
        f"fingerprint {view['input']['fingerprint'][:16]})",
        f"  output      {view['output']['path']} ({view['output']['format'] or NOTHING})",
        f"  total       {t['to_run']:,} to run, {t['cached']:,} cached, {t['skipped']:,} skipped; "
        f"{money(t['cost_expected'])} expected, {money(t['cost_upper'])} at most",
    ]
    for step in view["steps"]:
        lines += [""] + (_sql_lines(step) if step["kind"] == "sql" else _llm_lines(step))
    return "\n".join(lines)


def _sql_lines(step: dict[str, Any]) -> list[str]:
    c = step["counts"]
    most = f"at most {step['max_fanout']:,} per row" if step["max_fanout"] else "no bound per row"
    fan = f", fan-out ({most})" if step["fan_out"] else ""
    return [
        f"step {step['name']} (SQL{fan})",
        f"  rows        {c['rows']:,}, {c['skipped']:,} skipped",
        *[f"  sql         {line}" for line in step["sql"].strip().splitlines()],
    ]


def _llm_lines(step: dict[str, Any]) -> list[str]:
    c = step["counts"]
    mode = f"{step['mode']}, {step['mode_note']}" if step["mode_note"] else step["mode"]
    approx = "" if step["token_count_exact"] else f" (estimated; upper bound x{step['token_upper_factor']:g})"
    cost = (
        "cost unknown (no price)"
        if step["price"] is None
        else f"{money(c['cost_expected'])} expected, {money(c['cost_upper'])} at most"
    )
    lines = [
        f"step {step['name']}: {step['provider']}:{step['model']} [{mode}]",
        f"  counts      {c['rows']:,} rows: {c['to_run']:,} to run ({_changed(c)}), "
        f"{c['cached']:,} cached, {c['skipped']:,} skipped, {c['failed_earlier']:,} failed earlier, "
        f"{c['too_long']:,} too long, {c['projected']:,} projected",
        f"  tokens      {'' if step['token_count_exact'] else '~'}{c['input_tokens']:,} in{approx}, "
        f"~{c['output_tokens_expected']:,} out expected (<= {c['output_tokens_upper']:,}; "
        f"max_tokens {count(step['max_tokens'])})",
        f"  cost        {cost}",
        f"  price       {_price(step['price'])}",
        f"  source      {step['cost_source']}",
        f"  endpoint    {step['endpoint']}" + (f", api {step['api']}" if step["api"] else ""),
        f"  params      {json.dumps(step['params'], ensure_ascii=False)}",
    ]
    if step["options"]:
        lines.append(f"  options     {json.dumps(step['options'], ensure_ascii=False)}")
    if step.get("prompt_cache"):
        lines.append(f"  cache       {cache_text(step['prompt_cache'], step['provider'], step.get('mode'))}")
    if step["depends_on"]:
        when = f" when {step['when']}" if step["when"] else ""
        lines.append(f"  after       {', '.join(step['depends_on'])}{when}")
    schema = "none (text)" if step["schema_sent"] is None else ("strict" if step["strict"] else "not strict")
    lines.append(f"  schema      {schema}")
    lines += [f"    note: {note}" for note in step["schema_notes"]]
    if "requests" in step:
        lines += _request_lines(step["requests"])
    lines += _diff_lines(step.get("changed_samples", []))
    return lines


def cache_text(cache: dict[str, Any], provider: str, mode: str | None = None) -> str:
    """The step's shared prefix and what is sent for it, in one line."""
    where = "the system prompt" if cache["messages"] else "the prompt's literal head"
    if cache["messages"] and cache["chars"]:
        where += f" and the prompt's first {cache['chars']:,} characters"
    prefix = f"shared prefix {cache['tokens']:,} tokens ({where})"
    if not cache["sent"]:
        return f"{prefix}; not cached: {cache['note']}"
    sent = {
        "anthropic": f"cache_control breakpoint ({cache['ttl'] or '5m'})",
        "openai": "prompt_cache_key" + (", retention 24h" if cache["ttl"] == "24h" else ""),
    }.get(provider, "implicit caching (shared part first)")
    if cache.get("explicit"):
        until = "once its batches are collected" if mode == "batch" else "after the run"
        sent = f"explicit context cache of the system prompt ({cache['system_tokens']:,} tokens, deleted {until})"
    if cache.get("explicit_note"):  # `cache.explicit: auto`: what the plan weighed
        sent += f" (explicit cache, auto: {cache['explicit_note']})"
    return f"{prefix}; {sent}; hits {cache['source']}"


def _changed(counts: dict[str, Any]) -> str:
    causes = counts.get("changed_by") or {}
    why = ": " + api.causes_text(causes) if causes else ""
    return f"{counts['changed']:,} changed{why}"


def _price(price: dict[str, Any] | None) -> str:
    if price is None:
        return "none"
    text = f"{per_mtok(price['input_per_mtok'])} in, {per_mtok(price['output_per_mtok'])} out per MTok"
    if price.get("batch_input_per_mtok") is not None:
        text += f"; batch {per_mtok(price['batch_input_per_mtok'])} in, {per_mtok(price['batch_output_per_mtok'])} out"
    return text


def _request_lines(requests: dict[str, Any]) -> list[str]:
    lines = [f"  requests    sent as {requests['sent_as']}"]
    if requests.get("note"):
        lines.append(f"    note: {requests['note']}")
    for i, sample in enumerate(requests["samples"], 1):
        lines.append(f"  request {i}   row {sample['row_key']}, key {sample['request_key']}")
        if sample.get("shared_prefix_ends"):
            lines.append(
                f"    shared prefix ends after: {json.dumps(sample['shared_prefix_ends'], ensure_ascii=False)}"
            )
        body = json.dumps(sample["body"], indent=2, ensure_ascii=False)
        lines += [f"    {line}" for line in body.splitlines()]
    return lines
