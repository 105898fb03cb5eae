"""Command-line options shared by several commands, with their value checks.

Choices are click choices and numbers carry their ranges, so a bad value (`--mode foo`,
`--max-cost -1`) stops in argument parsing with exit 64 and the flag named, before any spec is
read or any call is made.
"""

from __future__ import annotations

from enum import Enum, StrEnum

import typer

StateOpt = typer.Option(None, "--state", help="State file or postgresql:// URL (default .batchor/state.duckdb)")
JsonOpt = typer.Option(False, "--json", help="Machine-readable output (NDJSON events for apply)")
MockOpt = typer.Option(False, "--mock", help="Swap the provider for the offline mock (free, deterministic)")
ModelOpt = typer.Option(None, "--model", help="Override the model: provider:name, e.g. openai:gpt-4.1-mini")


class Mode(StrEnum):
    """How steps reach the provider."""

    realtime = "realtime"
    batch = "batch"
    auto = "auto"


class PlanFormat(StrEnum):
    """How `plan` prints the plan."""

    text = "text"
    markdown = "markdown"
    json = "json"


def choice_value(choice: Enum | None) -> str | None:
    """The plain string behind an Enum choice (None stays None)."""
    return None if choice is None else str(choice.value)


ModeOpt = typer.Option(None, "--mode", help="realtime | batch | auto", case_sensitive=False)
FormatOpt = typer.Option(PlanFormat.text, "--format", help="text | markdown | json", case_sensitive=False)
PlanMaxCostOpt = typer.Option(None, "--max-cost", min=0.0, help="Show the plan against this budget (USD, >= 0)")
ApplyMaxCostOpt = typer.Option(
    None,
    "--max-cost",
    min=0.0,
    help="Budget in USD, >= 0: refuses a plan that may cost more; approves the run (no question, also on a terminal)",
)
LimitOpt = typer.Option(None, "--limit", min=1, help="Only the first N rows (N >= 1)")
SampleOpt = typer.Option(None, "--sample", min=1, help="N random rows, N >= 1 (seeded: same rows each time)")
