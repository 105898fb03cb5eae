"""`batchor review export` / `batchor review import`: parse, call batchor.review, print."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Optional

import typer

from batchor.cli.basics import print_json


def register(app: typer.Typer) -> None:
    """Add the `review` group to the main app."""
    review_app = typer.Typer(no_args_is_help=True, help="Review answers by hand and import the corrections.")
    app.add_typer(review_app, name="review")
    review_app.command("export")(review_export)
    review_app.command("import")(review_import)


def review_export(
    spec: Path = typer.Argument(..., help="Spec file (its latest run), a saved .plan or a run id"),
    output: Path = typer.Option(..., "--output", "-o", help="review.csv or review.jsonl"),
    where: Optional[str] = typer.Option(
        None, "--where", help='SQL expression over the answers, e.g. "classify.score <= 2"'
    ),
    sample: Optional[int] = typer.Option(None, "--sample", min=1, help="At most N of the rows, drawn at random"),
    step: Optional[str] = typer.Option(None, "--step", help="Step to review (default: the first LLM step)"),
    seed: int = typer.Option(0, "--seed", help="Seed of the --sample draw"),
    state: Optional[str] = typer.Option(None, "--state", help="State file or postgresql:// URL"),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON"),
) -> None:
    """Write answers to review, with their input, model and blank review.<field> columns."""
    from batchor import review

    done = review.export_review(spec, output, where=where, sample=sample, step=step, seed=seed, state=state)
    if as_json:
        return print_json(asdict(done))
    typer.echo(f"wrote {done.rows} row(s) of step {done.step} to {done.path} ({done.matched} matched the filter)")


def review_import(
    file: Path = typer.Argument(..., help="The filled-in review file"),
    reviewer: Optional[str] = typer.Option(None, "--reviewer", help="Who reviewed (default: $USER)"),
    state: Optional[str] = typer.Option(None, "--state", help="State file or postgresql:// URL"),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON"),
) -> None:
    """Store the file's corrections as reviewed labels (all or none)."""
    from batchor import review

    done = review.import_review(file, reviewer=reviewer, state=state)
    if as_json:
        return print_json(asdict(done))
    typer.echo(
        f"stored {done.corrections} reviewed label(s) of step {done.step} (job {done.job}) from {done.rows} row(s), "
        f"reviewer {done.reviewer}, file sha256 {done.sha256[:12]}; wrote {done.output}"
    )
