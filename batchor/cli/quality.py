"""`batchor check` and `batchor diff`, and the checks printed after `apply` (exit 9 when they fail)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import typer

from batchor.errors import ChecksFailedError
from batchor.lazy import Deferred

if TYPE_CHECKING:
    from batchor import quality
    from batchor.quality.checks import CheckReport
else:  # loaded by the commands that check or diff
    quality = Deferred("batchor.quality")

_FORMATS = ("text", "markdown", "json")


def register(app: typer.Typer) -> None:
    """Add the quality commands to the main app."""
    app.command("check")(check)
    app.command("diff")(diff)


def _format(fmt: str, as_json: bool) -> str:
    if as_json:
        return "json"
    if fmt not in _FORMATS:
        raise typer.BadParameter(f"--format must be one of {', '.join(_FORMATS)}, not {fmt!r}")
    return fmt


def _json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str, ensure_ascii=False) + "\n")


def check(
    target: str | None = typer.Argument(None, help="Run id (default: the latest run), .plan file or spec"),
    state: str | None = typer.Option(None, "--state", help="State file or postgresql:// URL"),
    fmt: str = typer.Option("text", "--format", help="text | markdown | json"),
    as_json: bool = typer.Option(False, "--json", help="Same as --format json"),
) -> None:
    """Run the spec's checks and golden-label metrics over stored answers (no calls); exit 9 if one fails."""
    report = quality.check(target, state=state)
    fmt = _format(fmt, as_json)
    show_checks(report, fmt)
    try:
        gate(report)
    except ChecksFailedError as exc:
        if fmt != "json":
            raise
        # the report (its `passed: false`) is the one JSON document on stdout; the verdict goes to stderr
        typer.echo(f"error [{exc.code}]: {exc.message}", err=True)
        raise typer.Exit(exc.exit_code) from None


def diff(
    a: str = typer.Argument(..., help="Run id, .plan file or spec (its latest run)"),
    b: str = typer.Argument(..., help="Run id, .plan file or spec (its latest run)"),
    state: str | None = typer.Option(None, "--state", help="State file or postgresql:// URL"),
    fmt: str = typer.Option("text", "--format", help="text | markdown | json"),
    as_json: bool = typer.Option(False, "--json", help="Same as --format json"),
    examples: int = typer.Option(5, "--examples", min=0, help="Changed rows to show per step"),
) -> None:
    """Compare the answers of two versions of a job row by row: changes, agreement, metrics, cost."""
    report = quality.diff(a, b, state=state, examples=examples)
    fmt = _format(fmt, as_json)
    if fmt == "json":
        _json(report.to_dict())
    else:
        from batchor.quality.diff_render import diff_markdown

        typer.echo(diff_markdown(report) if fmt == "markdown" else str(report))


def show_checks(report: CheckReport, fmt: str, err: bool = False) -> None:
    if fmt == "json":  # one JSON document
        sys.stdout.write(json.dumps(report.to_dict(), default=str, ensure_ascii=False) + "\n")
    else:
        from batchor.quality.render import checks_markdown, checks_text

        typer.echo(checks_markdown(report) if fmt == "markdown" else checks_text(report), err=err)


def gate(report: CheckReport | None) -> None:
    """Fail with `checks_failed` (exit 9) when a check failed; no report means no checks."""
    if report is not None and not report.passed:
        names = ", ".join(c.name for c in report.failed[:5])
        raise ChecksFailedError(
            f"{len(report.failed)} of {len(report.checks)} checks failed: {names}",
            hint="the answers are kept: fix the prompt or the checks, then "
            "`batchor check SPEC` re-checks without a call",
        )


def after_apply(compiled: Any, outcome: Any, state: str | None, as_json: bool) -> CheckReport | None:
    """Run the plan's checks once its run settled and print them (stderr, or an NDJSON event
    with --json); None when the spec has none or the run did not settle."""
    report = quality.checks_after_run(compiled, outcome.run_id, outcome.status, state)
    if report is None:
        return None
    if as_json:
        sys.stdout.write(json.dumps({"event": "checks", **report.to_dict()}, default=str) + "\n")
    else:
        from batchor.quality.render import checks_text

        typer.echo(checks_text(report), err=True)
    return report
