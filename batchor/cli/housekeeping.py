"""Housekeeping commands: the state's upkeep (`prune`, `state migrate`, `state check`), the price
table (`prices`), a new project (`init`), the spec format's schema (`spec-schema`) and the API
keys specs need (`keys`). None of them runs a plan; they live apart from the commands that do
(cli/main.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from batchor.cli.basics import print_json
from batchor.cli.options import JsonOpt, StateOpt
from batchor.cli.state_check import state_check
from batchor.humanize import plural
from batchor.lazy import Deferred

if TYPE_CHECKING:
    from batchor.cli import tables
else:  # rich loads with the first command that prints a table
    tables = Deferred("batchor.cli.tables")


def register(app: typer.Typer) -> None:
    """Add `prune`, `prices`, `init` and `keys` to the main app."""
    app.command()(prune)
    app.command()(prices)
    app.command()(init)
    app.command()(keys)


def register_state(app: typer.Typer) -> None:
    """Add the `state` group (`migrate`, `check`) and `spec-schema` to the main app."""
    state_app = typer.Typer(no_args_is_help=True, help="Manage the state itself (schema, moving it between backends).")
    app.add_typer(state_app, name="state")
    state_app.command("migrate")(state_migrate)
    state_app.command("check")(state_check)
    app.command("spec-schema")(spec_schema)


def prune(
    state: Optional[str] = StateOpt,
    as_json: bool = JsonOpt,
    older_than: Optional[float] = typer.Option(
        None, "--older-than", min=0.0, help="Only attempts older than DAYS (>= 0)"
    ),
    finished: bool = typer.Option(False, "--finished", help="Only attempts of finished runs"),
    answers: bool = typer.Option(False, "--answers", help="Also delete cached answers (they will be paid again)"),
    compact: bool = typer.Option(
        False, "--compact", help="Rewrite the DuckDB file so it shrinks (not while an apply runs); reports bytes freed"
    ),
) -> None:
    """Delete stored raw request/response payloads (answers stay unless --answers). The file only
    gets smaller with --compact: DuckDB reuses the freed space but does not give it back."""
    from batchor import operations

    data = operations.prune(
        state=state, older_than_days=older_than, finished=finished, answers=answers, compact=compact
    )
    print_json(data) if as_json else typer.echo(pruned_text(data))


def pruned_text(data: dict[str, int]) -> str:
    """What `prune` did, as a sentence."""
    text = (
        f"Dropped {plural(data.get('raw_payloads_dropped', 0), 'raw request/response payload')}"
        f" and {plural(data.get('answers_dropped', 0), 'cached answer')}."
    )
    if "bytes_freed" in data:
        text += (
            f" Compacted the state file from {data['bytes_before']:,} to {data['bytes_after']:,} bytes"
            f" ({data['bytes_freed']:,} bytes freed)."
        )
    else:
        text += " The file keeps its size (DuckDB reuses the space); `batchor prune --compact` shrinks it."
    return text


def prices(
    query: Optional[str] = typer.Argument(None, help="Model name or part of it"),
    provider: Optional[str] = typer.Option(None, "--provider"),
    as_json: bool = JsonOpt,
) -> None:
    """Show the price table in use (version, date) and look up models."""
    from batchor import operations

    data = operations.prices(query, provider=provider)
    if as_json:
        print_json(data)
        return
    tables.show(tables.prices_view(data))


def init(
    folder: Path = typer.Argument(Path("batchor-job"), help="Folder to create"),
    name: Optional[str] = typer.Option(None, "--name", help="Job name (default: the folder name)"),
    force: bool = typer.Option(False, "--force", help="Overwrite existing files"),
    as_json: bool = JsonOpt,
) -> None:
    """Scaffold a spec, a JSON schema and a sample row file in a new folder."""
    from batchor.scaffold import init_project, state_marker

    created = init_project(folder, name, force)
    marker, made = state_marker(folder)
    follow = f"batchor validate {folder}/job.yaml && batchor apply {folder}/job.yaml --mock --yes"
    if as_json:
        print_json({"created": [str(p) for p in created], "state_folder": str(marker), "next": follow})
        return
    for path in created:
        typer.echo(f"created {path}")
    typer.echo(f"{'created' if made else 'using'} {marker}/ (the project's state lives there)")
    typer.echo(f"next: {follow}")


def keys(
    specs: list[Path] = typer.Argument(..., help="Spec files (e.g. specs/*.yaml)"),
    check: bool = typer.Option(False, "--check", help="Exit 1 (error no_api_key) when one is not set"),
    as_json: bool = JsonOpt,
) -> None:
    """List the API key variables the specs' steps need and whether each is set (no call is made)."""
    from batchor import api

    needs = api.required_keys(list(specs))
    if as_json:
        print_json([need.to_dict() for need in needs])
    else:
        for need in needs:
            status = f"set ({need.set_as})" if need.set_as else "MISSING"
            typer.echo(
                f"{' or '.join(need.envs):34} {status:26} {need.provider}: {need.spec} ({', '.join(need.steps)})"
            )
        if not needs:
            typer.echo("no API key needed")
    if check:
        api.missing_keys(needs)


def state_migrate(
    target: str = typer.Option(..., "--to", help="State to create, upgrade or fill (file or URL)"),
    source: Optional[str] = typer.Option(None, "--from", help="State to copy from (file or URL)"),
    as_json: bool = JsonOpt,
) -> None:
    """Bring --to up to the current schema; with --from, copy runs, answers, attempts and batches into it."""
    from batchor import operations

    data = operations.migrate_state(target, source)
    if as_json:
        print_json(data)
        return
    typer.echo(f"{data['to']}: schema version {data['schema_version'] or 'current'}")
    for table, counts in data.get("tables", {}).items():
        typer.echo(f"  {table:15} {counts['added']:>10,} added ({counts['read']:,} read)")


def spec_schema(
    write: bool = typer.Option(False, "--write", help="Write schemas/batchor-spec.schema.json"),
    as_json: bool = typer.Option(
        False, "--json", help="The schema is JSON already; with --write: what was written, as JSON"
    ),
) -> None:
    """Print (or write) the JSON Schema of the spec format."""
    from batchor.spec.json_schema import SCHEMA_FILE, spec_json_schema_text

    if write:
        SCHEMA_FILE.parent.mkdir(parents=True, exist_ok=True)
        SCHEMA_FILE.write_text(spec_json_schema_text(), encoding="utf-8")
        print_json({"wrote": str(SCHEMA_FILE)}) if as_json else typer.echo(f"wrote {SCHEMA_FILE}")
    else:
        sys.stdout.write(spec_json_schema_text())
