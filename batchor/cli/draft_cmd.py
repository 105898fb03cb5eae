"""`batchor draft "what you want" --data FILE`: parse, call batchor.draft, print. The draft, its
rehearsal and its plan are shown before the files are written; a terminal asks first (unless
--yes), a script writes (drafting is cheap, and existing files are never overwritten without
--force)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from batchor.cli import ask
from batchor.errors import ApprovalRequiredError
from batchor.humanize import money

if TYPE_CHECKING:
    from batchor.draft import Attempt, Draft


def draft(
    task: str = typer.Argument(..., help="What you want done to each row, in a sentence"),
    data: Path = typer.Option(..., "--data", help="The data file (CSV, TSV, JSONL, Parquet, XLSX)"),
    model: Optional[str] = typer.Option(
        None,
        "--model",
        help="Who drafts, provider:name (default: by the "
        "API key set: openai:gpt-4.1, anthropic:claude-sonnet-4-5, "
        "gemini:gemini-2.5-flash)",
    ),
    output: Path = typer.Option(
        Path("spec.yaml"),
        "--output",
        "-o",
        help="Spec file to write (its output schema goes beside it: JOB.output.schema.json)",
    ),
    rows: int = typer.Option(5, "--rows", min=1, max=50, help="Sample rows the model is shown"),
    no_rows: bool = typer.Option(False, "--no-rows", help="Show the model column names and types only, no row values"),
    mock: bool = typer.Option(
        False,
        "--mock",
        help="Offline: a template draft from the columns (a rehearsal of the flow; no model reads the task)",
    ),
    yes: bool = typer.Option(False, "--yes", "-y", help="Write without asking (a terminal asks)"),
    force: bool = typer.Option(False, "--force", help="Overwrite existing files"),
    attempts: int = typer.Option(
        3,
        "--attempts",
        min=1,
        max=10,
        help="Drafts asked for at most (each invalid one is sent back with its problems)",
    ),
    no_cache: bool = typer.Option(
        False, "--no-cache", help="Ask the model again even for a request it answered before"
    ),
    max_cost: Optional[float] = typer.Option(
        None, "--max-cost", min=0.0, help="Budget in USD for the drafting calls (a call that could pass it is not made)"
    ),
    state: Optional[str] = typer.Option(
        None, "--state", help="State recording the drafter's calls (default: the project's)"
    ),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output"),
) -> None:
    """Draft a spec and its output schema from one sentence and a data file: a model writes it,
    batchor validates it (asking again with the problems), rehearses it with the mock provider,
    shows the plan, then writes the files."""
    from batchor.draft import DraftRequest
    from batchor.draft import draft as make_draft

    request = DraftRequest(
        task=task,
        data=data,
        output=output,
        model=model,
        mock=mock,
        rows=0 if no_rows else rows,
        attempts=attempts,
        force=force,
        fresh=no_cache,
        state=state,
        max_cost=max_cost,
    )
    if not as_json:
        _announce(request)
    result = make_draft(
        request, confirm=lambda d: _show_and_confirm(d, yes, as_json), on_attempt=None if as_json else _attempt_line
    )
    if as_json:
        sys.stdout.write(json.dumps(draft_dict(result), indent=2, default=str) + "\n")
        return
    typer.echo(_written_line(result), err=True)


def _announce(request: Any) -> None:
    from batchor.draft import drafter_for

    drafter, (provider, name) = drafter_for(request.model, request.mock)
    shown = f"{request.rows} sample row(s)" if request.rows else "column names and types only (--no-rows)"
    if drafter == "template":
        typer.echo(
            f"mock: a template draft built from the columns of {request.data} (no model reads the task): a "
            f"rehearsal of the draft flow, not a draft of the task; the spec names {provider}:{name}",
            err=True,
        )
    else:
        typer.echo(
            f"drafting with {drafter}: shown the task and {shown} of {request.data}; "
            f"the spec will use {provider}:{name}",
            err=True,
        )


def _attempt_line(attempt: Attempt) -> None:
    cost = "" if attempt.run_id is None else f" (run {attempt.run_id}, {money(attempt.cost_usd)})"
    if not attempt.problems:
        typer.echo(f"draft {attempt.number}: valid, rehearsed{cost}", err=True)
        return
    then = "no attempt left" if attempt.last else "sent back to the model"
    typer.echo(f"draft {attempt.number}: {len(attempt.problems)} problem(s){cost}; {then}:", err=True)
    for problem in attempt.problems:
        typer.echo(f"  {problem}", err=True)


def _show_and_confirm(result: Draft, yes: bool, as_json: bool) -> bool:
    """Print the draft, its rehearsal and its plan; on a terminal without --yes, ask."""
    if as_json:
        return True
    from batchor.cli import render
    from batchor.cli.colour import coloured

    typer.echo(result.spec_text)
    r = result.rehearsal
    typer.echo(
        f"rehearsal: {r.succeeded + r.failed} row(s) through the mock provider: {r.succeeded} answered, "
        f"{r.failed} failed (mock answers follow the schema; they say nothing of the model)",
        err=True,
    )
    plan = [line for line in render.plan_text(result.plan, None).splitlines() if not line.startswith("  state ")]
    typer.echo(coloured("\n".join(plan), sys.stderr), err=True)  # its state was a scratch one: nothing cached
    if yes or not (sys.stdin.isatty() and sys.stderr.isatty()):
        return True
    names = " and ".join(str(p) for p in result.outputs)
    if not ask.confirm(f"Write {names}?", default=True):
        raise ApprovalRequiredError(f"not written; drafting cost {money(result.cost_usd)}")
    return True


def _written_line(result: Draft) -> str:
    names = ", ".join(str(p) for p in result.written)
    runs = [a.run_id for a in result.attempts if a.run_id]
    cost = (
        f"drafting cost {money(result.cost_usd)} in {len(runs)} call(s) (runs {', '.join(runs)})"
        if runs
        else "drafting cost $0 (mock: no model was called)"
    )
    upper = result.plan.header.totals.cost_upper
    return f"wrote {names}; {cost}\nnext: batchor apply {result.request.output} --max-cost {_budget(upper)}"


def _budget(upper: float) -> str:
    """A round budget at or above the plan's upper bound."""
    for step in (0.01, 0.1, 1, 5, 10, 50, 100, 500, 1000):
        if upper <= step:
            return f"{step:g}"
    return f"{int(upper) + 1}"


def draft_dict(result: Draft) -> dict[str, Any]:
    from batchor.cli import render

    r, totals = result.rehearsal, result.plan.header.totals
    return {
        "spec": str(result.request.output),
        "written": [str(p) for p in result.written],
        "drafter": result.drafter,
        "mocked": result.drafter == "template",
        "cost_usd": result.cost_usd,
        "attempts": [
            {"number": a.number, "run_id": a.run_id, "cost_usd": a.cost_usd, "problems": a.problems}
            for a in result.attempts
        ],
        "rehearsal": {"run_id": r.run_id, "status": r.status, "succeeded": r.succeeded, "failed": r.failed},
        "plan": {
            "rows": totals.rows,
            "cost_expected_usd": totals.cost_expected,
            "cost_upper_usd": totals.cost_upper,
            "steps": render.plan_dict(result.plan).get("steps"),
        },
        "spec_text": result.spec_text,
        "schema_text": result.schema_text,
    }
