"""`batchor state check`: scan the whole state for damage (operations.check_state)."""

from __future__ import annotations

import json
import sys
from typing import Optional

import typer


def state_check(
    state: Optional[str] = typer.Option(None, "--state", help="State file or postgresql:// URL"),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output"),
) -> None:
    """Read every stored value once: damage anywhere in the state fails with `state_corrupt`."""
    from batchor import operations  # DuckDB loads only for this command

    report = operations.check_state(state)
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
        return
    typer.echo(f"ok  {report['state']}: " + ", ".join(f"{t} {n:,}" for t, n in report["tables"].items()))
