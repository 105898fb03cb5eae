"""`batchor validate`: every given spec is checked and every problem printed before the exit code."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from batchor.errors import EXIT_OK, BatchorError, problems_of
from batchor.lazy import Deferred

if TYPE_CHECKING:
    from batchor import api
else:
    api = Deferred("batchor.api")


def validate_all(specs: list[Path], *, as_json: bool, model: str | None, mock: bool) -> int:
    """Validate each spec in turn (one bad file never hides the next); the exit code of the first failure."""
    results: list[dict[str, Any]] = []
    exit_code = EXIT_OK
    for spec in specs:
        try:
            report = api.validate(spec, model=model, mock=mock)
        except BatchorError as exc:
            exit_code = exit_code or exc.exit_code
            results.append(_failed(spec, exc, as_json))
            continue
        results.append(report.to_dict())
        if not as_json:
            typer.echo(f"ok  {report.spec} ({len(report.steps)} step(s))")
            for warning in report.warnings:
                typer.echo(f"    warning: {warning}")
    if as_json:
        sys.stdout.write(json.dumps(results, indent=2, default=str) + "\n")
    elif len(specs) > 1:
        failed = sum(1 for r in results if not r["ok"])
        summary = f"{len(specs) - failed} of {len(specs)} spec(s) valid"
        typer.echo(summary + (f", {failed} with problems" if failed else ""), err=bool(failed))
    return exit_code


def _failed(spec: Path, exc: BatchorError, as_json: bool) -> dict[str, Any]:
    problems = problems_of(exc)
    if not as_json:
        typer.echo(f"FAIL {spec}: {len(problems)} problem(s)", err=True)
        for problem in problems:
            typer.echo(f"  error [{problem.code}]: {problem.message}", err=True)
            if problem.hint:
                typer.echo(f"    fix: {problem.hint}", err=True)
    return {"spec": str(spec), "ok": False, "problems": [p.to_dict() for p in problems]}
