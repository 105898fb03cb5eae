"""`batchor status`, `cancel`, `runs` and `export`: a run's ledger read through `batchor.operations`
and printed (tables on a terminal, `--json` for machines). Parsing and printing only.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from batchor.cli.basics import print_json
from batchor.cli.options import JsonOpt, StateOpt
from batchor.lazy import Deferred

if TYPE_CHECKING:
    from batchor.cli import tables
else:  # rich loads with the first command that prints a table
    tables = Deferred("batchor.cli.tables")


def register(app: typer.Typer) -> None:
    """Add the ledger commands to `app`, in the order `--help` lists them."""
    for command in (status, cancel, runs, export):
        app.command()(command)


def status(
    run: Optional[str] = typer.Argument(None, help="Run id (default: the latest)"),
    state: Optional[str] = StateOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Show a run: progress, spend, failures by reason."""
    from batchor import operations

    data = operations.status(run, state=state)
    if as_json:
        print_json(data)
        return
    tables.show(tables.status_view(data))


def cancel(
    run: Optional[str] = typer.Argument(None, help="Run id (default: the latest)"),
    state: Optional[str] = StateOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Cancel the run's provider batches still in flight; a later apply collects what they finished."""
    from batchor import operations

    data = operations.cancel(run, state=state)
    if as_json:
        print_json(data)
        return
    tables.show(tables.batches_table(data["batches"])) if data["batches"] else typer.echo("no batches in flight")


def runs(
    state: Optional[str] = StateOpt, as_json: bool = JsonOpt, limit: int = typer.Option(20, "--limit", min=1)
) -> None:
    """Run history with cost."""
    from batchor import operations

    rows = operations.runs(state=state, limit=limit)
    if as_json:
        print_json(rows)
        return
    tables.show(tables.runs_table(rows)) if rows else typer.echo(tables.no_runs_yet(state))


def export(
    run: Optional[str] = typer.Argument(
        None, help="Run id (default: the latest): its plan's rows, with the answers stored now"
    ),
    output: Path = typer.Option(..., "--output", "-o", help="File to write (.csv .parquet .jsonl .duckdb)"),
    state: Optional[str] = StateOpt,
    as_json: bool = JsonOpt,
    attempts: bool = typer.Option(False, "--attempts", help="Export every attempt with raw payloads (JSONL)"),
) -> None:
    """Write a run's results (also while it runs: unanswered rows are `pending`)."""
    from batchor import operations

    data = (
        operations.export_attempts(output, run, state=state)
        if attempts
        else operations.export(output, run, state=state)
    )
    print_json(data) if as_json else typer.echo(f"wrote {data['output']}")
    if data.get("note") and not as_json:
        typer.echo(f"note: {data['note']}", err=True)
