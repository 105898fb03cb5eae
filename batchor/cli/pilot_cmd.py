"""`plan --pilot N` and `apply --pilot N`: print what the pilot may cost, run it (batchor/pilot/),
then print the full plan calibrated by its answers. Parsing and printing only: the pilot's rules
(the budget it leaves, refusing the rest) are the pilot package's."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import typer

from batchor.errors import UsageError, exit_code_for_status
from batchor.lazy import Deferred

if TYPE_CHECKING:
    from batchor import pilot as pilots
    from batchor.api import Plan as CompiledPlan
    from batchor.cli import render
    from batchor.pilot import AutoBound, AutoPilot, PilotResult, TopUpBound
else:  # the engine loads only when a pilot runs
    pilots = Deferred("batchor.pilot")
    render = Deferred("batchor.cli.render")

PilotOpt = typer.Option(
    None,
    "--pilot",
    metavar="N|auto",
    help="Run N sampled rows for real first (cached, not paid twice), then print the plan "
    "calibrated by their answers (expected cost with a 90% interval); `auto`: 50 rows, grown "
    "(at most twice, to 8 x 50) while the whole job's interval is wider than --pilot-target",
)
PilotTargetOpt = typer.Option(
    None,
    "--pilot-target",
    min=1.0,
    max=50.0,
    metavar="PERCENT",
    help="The whole job's 90% interval a pilot aims at, +- this percent (default 10): "
    "the plan says which pilot reaches it; --pilot auto grows until it does",
)
PilotSeedOpt = typer.Option(
    None,
    "--pilot-seed",
    help="Seed of the pilot's sample (default: the spec's input seed; the same seed draws the same rows)",
)


def pilot_rows(value: str) -> tuple[int, bool]:
    """`--pilot N` or `--pilot auto`: the (first) rows and whether the pilot grows by itself."""
    return pilots.pilot_rows(value)


def check_target(pilot: str | None, target: float | None) -> None:
    """`--pilot-target` sets what a pilot aims at: without `--pilot` it would be silently ignored."""
    if target is not None and pilot is None:
        raise UsageError("--pilot-target needs a pilot", hint="add --pilot N or --pilot auto")


def auto_text(auto: AutoBound, target: float) -> str:
    """What an auto pilot may add to its first round, at most (announced before anything is sent)."""
    bound, money = auto.to_dict(), render.money
    return (
        f"  auto        if the whole job's 90% interval is then wider than +-{target:.0%}, the same sample grows "
        f"(at most {pilots.ROUNDS} more rounds; rows answered stay cached) up to {bound['rows_most']:,} rows: "
        f"at most {bound['most_calls']:,} requests in all, {money(bound['cost_upper_usd'])} at most in all "
        f"({money(bound['cost_upper_all_attempts_usd'])} with every attempt)"
    )


def announce_text(sampled: CompiledPlan, bound: TopUpBound | None = None) -> str:
    """What the pilot will do and cost at most, printed before anything is sent."""
    p, money = pilots.pilot_dict(sampled, bound), render.money
    drawn = sampled.header.input.rows  # fewer than asked for when the input is smaller
    rows = (
        f"{drawn:,} rows (the whole input: it has fewer than {p['rows']:,})"
        if drawn < p["rows"]
        else f"{p['rows']:,} rows"
    )
    lines = [
        f"Pilot: {rows} (seed {p['seed']}) through {len(p['steps'])} LLM step(s) "
        f"({', '.join(p['steps'])}): at most {p['most_calls']:,} requests ({p['rows']:,} x {len(p['steps'])}, "
        f"re-asks included), {money(p['cost_upper_usd'])} at most (one attempt each; "
        f"{money(p['cost_upper_all_attempts_usd'])} if every request used all its attempts)",
        f"  output      {p['output']} (the spec's output is left as it is)",
    ]
    if (top := p["top_up"]) is not None:
        rows = (
            f"rows where {top['drawn_where']}'s `when:` holds (it reads only the row)"
            if top["drawn_where"]
            else "more rows of the same sample"
        )
        lines.append(
            f"  top-up      step(s) {', '.join(top['steps'])} run only where `when:` holds: if one gets fewer "
            f"than {p['rows']:,} answers, the calls left buy {rows} (up to "
            f"{top['rows_most']:,} rows in all, still at most {p['most_calls']:,} requests): "
            f"{money(top['cost_upper_usd'])} at most ({money(top['cost_upper_all_attempts_usd'])} with "
            "every attempt)"
        )
    if p["mocked"]:
        lines.append("  REHEARSAL   --mock: the pilot's numbers rehearse the flow, not the model's cost")
    return "\n".join(lines)


def pilot(
    spec: Path,
    value: str,
    seed: int | None,
    *,
    state: str | None,
    model: str | None,
    mock: bool,
    mode: str | None,
    max_cost: float | None,
    as_json: bool,
    approve: Callable[[], None],
    target: float | None = None,
) -> PilotResult:
    """Announce, approve, run the pilot (`value`: N rows or `auto`); print its run and the calibrated
    plan. Exits when it stopped."""
    share = (target if target is not None else 10.0) / 100

    def announce(sampled: CompiledPlan, bound: TopUpBound | None, most: AutoBound | None = None) -> None:
        if not as_json:
            lines = [announce_text(sampled, bound), *([auto_text(most, share)] if most is not None else [])]
            typer.echo("\n".join(lines), err=True)
        if sampled.header.totals.to_run:
            approve()

    def say(text: str) -> None:
        if not as_json:
            typer.echo(text, err=True)

    printer = render.EventPrinter(as_json)
    try:
        ran = pilots.run(
            spec,
            value,
            seed=seed,
            state=state,
            model=model,
            mock=mock,
            mode=mode,
            max_cost=max_cost,
            on_event=printer,
            announce=announce,
            report=say,
            target=target,
        )
    finally:
        printer.close()
    _print(ran.result, as_json, max_cost, ran.auto)
    return ran.result


def _print(result: PilotResult, as_json: bool, max_cost: float | None, grown: AutoPilot | None = None) -> None:
    outcome = result.last_outcome
    if as_json:
        data: dict[str, Any] = {
            "event": "pilot",
            **result.to_dict(),
            "plan": render.plan_dict(result.plan),
            "auto": grown.to_dict() if grown is not None else None,
        }
        sys.stdout.write(json.dumps(data, default=str) + "\n")
        sys.stdout.flush()
    else:
        typer.echo("pilot " + render.run_summary(result.outcome, result.pilot), err=True)
        for top in result.top_ups:
            before = ", ".join(f"{step} {n:,}" for step, n in top.answers_before.items())
            typer.echo(
                f"pilot top-up to {top.rows:,} rows (answers before: {before}): {top.outcome.status}, "
                f"{render.money(top.outcome.cost_usd)}",
                err=True,
            )
        if result.stratified is not None:
            typer.echo(stratified_text(result.stratified), err=True)
        typer.echo(
            f"pilot calls: {result.calls:,} of {result.allowance:,} allowed ({result.rows:,} rows x "
            f"{len(pilots.llm_steps(result.pilot))} LLM step(s); every billed attempt, re-asks included)",
            err=True,
        )
        if grown is not None:
            sizes = " -> ".join(f"{r.rows:,}" for r in grown.rounds)
            typer.echo(
                f"pilot auto: {sizes} rows, {render.money(result.cost_usd)} in all; stopped: {grown.stop}", err=True
            )
    if result.stopped:
        typer.echo(f"pilot stopped: {outcome.stop_reason}; nothing calibrated", err=True)
        raise typer.Exit(exit_code_for_status(outcome.status))
    if not as_json:
        typer.echo(render.plan_text(result.plan, max_cost))
        typer.echo("\n".join(calibrated_lines(result)))
        left = budget_left_line(max_cost, result)
        if left:
            typer.echo(left)


def calibrated_lines(result: PilotResult) -> list[str]:
    """The calibrated plan, with the pilot that would bring the whole job within +-10 % below its line."""
    lines = pilots.calibration_lines(result.calibration, result.rehearsal)
    text = result.size.text() if result.size is not None else None
    if text is not None:
        at = next((i + 1 for i, line in enumerate(lines) if line.startswith("  whole job")), len(lines))
        lines.insert(at, f"  pilot size  {text}")
    return lines


def budget_left_line(max_cost: float | None, result: PilotResult) -> str | None:
    """'budget left $0.0054 of $0.0060 (--max-cost) after the pilot's $0.0006: the rest's $0.0091 at
    most is ABOVE it': the budget covers the pilot and the rest together."""
    found = pilots.budget_left(max_cost, result)
    if found is None:
        return None
    left, budget, source = found
    upper = result.plan.header.totals.cost_upper
    return (
        f"  budget left {render.money(left)} of {render.money(budget)} ({source}) after the pilot's "
        f"{render.money(result.cost_usd)}: the rest's {render.money(upper)} at most is "
        f"{'within' if upper <= left + 1e-12 else 'ABOVE'} it"
    )


def stratified_text(stratified: dict[str, Any]) -> str:
    """'pilot top-up drew 17 rows where reply's `when:` holds (30.0% of all rows); triage's answers
    weighted to that share (32 from those rows, 35 from others: as 59 answers)'."""
    text = f"pilot top-up drew {stratified['rows_drawn']:,} rows where {stratified['where']}'s `when:` holds"
    if stratified["share"] is not None:
        text += f" ({stratified['share']:.1%} of all rows)"
    for step, w in stratified["weighted"].items():
        text += (
            f"; {step}'s answers weighted to that share ({w['inside']:,} from those rows, {w['outside']:,} "
            f"from others: as {w['effective']:,} answers)"
        )
    return text


def remaining_budget(max_cost: float | None, result: PilotResult) -> float | None:
    """What the pilot left of the budget: the rest's (the pilot package's rule)."""
    return pilots.remaining_budget(max_cost, result)


def apply_after_pilot(result: PilotResult, **options: Any) -> Any:
    """The rest of the job after the pilot (batchor.pilot.apply_after_pilot)."""
    return pilots.apply_after_pilot(result, **options)
