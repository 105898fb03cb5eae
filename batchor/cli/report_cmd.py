"""`batchor report [RUN] -o report.html`: see a run (HTML page, markdown for a PR, or JSON)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

_FORMATS = ("html", "markdown", "json")


def report(
    run: Optional[str] = typer.Argument(None, help="Run id (default: the latest)"),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="File to write (default: stdout for markdown/json, report.html for html)"
    ),
    fmt: str = typer.Option("html", "--format", help="html | markdown | json"),
    state: Optional[str] = typer.Option(None, "--state", help="State file or postgresql:// URL"),
    as_json: bool = typer.Option(False, "--json", help="Same as --format json"),
    seed: int = typer.Option(0, "--seed", help="Seed of the random sample answers (same seed, same rows)"),
) -> None:
    """A run's report: summary, spend, per-step tokens/cost/latency, failures, sample answers, checks, plan."""
    from batchor.report import report as build
    from batchor.report import write_report

    fmt = "json" if as_json else fmt
    if fmt not in _FORMATS:
        raise typer.BadParameter(f"must be one of {', '.join(_FORMATS)}, not {fmt!r}", param_hint="--format")
    text = build(run, state=state, fmt=fmt, seed=seed)
    if output is None and fmt != "html":
        sys.stdout.write(text)
        return
    path = write_report(output or Path("report.html"), text)
    typer.echo(f"wrote {path}", err=True)
