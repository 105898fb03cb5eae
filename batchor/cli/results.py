"""`batchor results`: a run's results where the user is looking.

With `-o FILE` it writes a file, like `export`. Without, it prints: CSV when stdout is a pipe or
a file (`batchor results | duckdb`, `> out.csv`), JSON lines with `--json`, and on a terminal the
first rows, one block per row, since a million CSV lines scrolling past help nobody.
"""

from __future__ import annotations

import csv
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import typer

_NAME_WIDTH = 32


def results(
    run: str | None = typer.Argument(
        None, help="Run id (default: the latest): its plan's rows, with the answers stored now"
    ),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Write this file (.csv .parquet .jsonl .duckdb) instead"
    ),
    state: str | None = typer.Option(None, "--state", help="State file or postgresql:// URL"),
    as_json: bool = typer.Option(False, "--json", help="JSON lines, one per row"),
    head: int = typer.Option(20, "--head", help="Rows shown on a terminal (0: all)"),
) -> None:
    """Print a run's results (a table on a terminal, CSV when piped), or write them with -o."""
    from batchor import operations

    if output is not None:
        data = operations.export(output, run, state=state)
        typer.echo(f"wrote {data['output']}")
        _note(data)
        return
    with tempfile.TemporaryDirectory(prefix="batchor-results-") as tmp:
        path = Path(tmp) / ("results.jsonl" if as_json else "results.csv")
        _note(operations.export(path, run, state=state))
        if as_json or not sys.stdout.isatty():
            with path.open("r", encoding="utf-8", newline="") as handle:
                shutil.copyfileobj(handle, sys.stdout)
            return
        _print_records(path, head)


def _note(data: dict[str, Any]) -> None:
    """An earlier run's rows are shown as they are now: said on stderr, so piped data stays data."""
    if data.get("note"):
        typer.echo(f"note: {data['note']}", err=True)


def _print_records(path: Path, head: int) -> None:
    """One block per row, `column  value` per line: readable at any width, however many columns."""
    width = shutil.get_terminal_size((100, 24)).columns
    total = 0
    with path.open("r", encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        columns = next(reader)
        name_width = min(max(map(len, columns)), _NAME_WIDTH)
        for total, row in enumerate(reader, start=1):
            if head and total > head:
                continue
            typer.echo(f"-- row {total:,}")
            for name, value in zip(columns, row):
                typer.echo(f"  {name:{name_width}}  {_cell(value, width - name_width - 4)}".rstrip())
    if head and total > head:
        typer.echo(f"{head:,} of {total:,} rows shown: `--head 0` for all, `| less`, or `-o FILE`")
    elif not total:
        typer.echo("no rows")


def _cell(value: str, width: int) -> str:
    from batchor.cli.colour import terminal_safe

    flat = terminal_safe(" ".join(value.split()))
    width = max(width, 10)
    return flat if len(flat) <= width else flat[: width - 1] + "…"
