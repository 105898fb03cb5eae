"""`batchor compare SPEC --models a,b,c --sample N`: the same sample on each model, a table, and the
cheapest model passing every check (batchor/choose/). Parsing and printing only."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

import typer

from batchor.cli.basics import print_json
from batchor.cli.options import JsonOpt, MockOpt, Mode, ModeOpt, StateOpt, choice_value
from batchor.lazy import Deferred

if TYPE_CHECKING:
    from batchor import choose
else:
    choose = Deferred("batchor.choose")


def register(app: typer.Typer, approve: Callable[[bool, Optional[float]], None]) -> None:
    """Add `compare` to the main app; `approve(yes, max_cost)` is apply's approval."""

    @app.command("compare")
    def compare(
        spec: Path = typer.Argument(..., help="Spec file"),
        models: str = typer.Option(..., "--models", help="Models to compare, provider:name separated by commas"),
        sample: int = typer.Option(50, "--sample", min=1, help="Rows of the seeded sample each model answers"),
        reference: Optional[str] = typer.Option(
            None, "--reference", help="The model others are compared with (default: the dearest full job)"
        ),
        seed: Optional[int] = typer.Option(None, "--seed", help="The sample's seed (the same seed, the same rows)"),
        max_cost: Optional[float] = typer.Option(
            None, "--max-cost", min=0.0, help="Budget in USD for all models together, checked before any call"
        ),
        yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation"),
        fmt: str = typer.Option("text", "--format", help="text | markdown"),
        as_json: bool = JsonOpt,
        state: Optional[str] = StateOpt,
        mode: Optional[Mode] = ModeOpt,
        mock: bool = MockOpt,
    ) -> None:
        """Run the same seeded sample on several models; print per model the sample's cost, the full
        job's projected cost, checks passed, golden-label metrics, agreement and p50 latency, and the
        cheapest model that passes every check (exit 9 when none does)."""

        def announce(bounds: dict[str, float]) -> None:
            if not as_json:
                most = ", ".join(f"{m} ${v:.4f}" for m, v in bounds.items())
                total = sum(bounds.values())
                typer.echo(f"compare: {sample} rows on {len(bounds)} models, at most ${total:.4f} ({most})", err=True)
            approve(yes, max_cost)

        found = choose.compare(
            spec,
            models.split(","),
            sample,
            reference=reference,
            seed=seed,
            state=state,
            mode=choice_value(mode),
            mock=mock,
            max_cost=max_cost,
            approve=announce,
        )
        if as_json or fmt == "json":
            print_json(found.to_dict())
        elif fmt == "markdown":
            from batchor.choose.render import comparison_markdown

            typer.echo(comparison_markdown(found))
        else:
            typer.echo(str(found))
        sys.stdout.flush()
        choose.gate(found)
