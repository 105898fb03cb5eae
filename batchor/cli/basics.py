"""Options every command shares: `--version`, `-v/--verbose`, `-q/--quiet`, and logging.

batchor logs through the standard `logging` module under the `batchor` logger, so a library user
configures it like any other. The CLI sets it up once per command: the level comes from
`-v` (info), `-vv` (debug) or `-q` (errors only), else from `BATCHOR_LOG` (a level name or number),
else warnings. `-q` also silences what the CLI prints for people (plan summary, live view, run
summary): only errors, warnings and the data asked for remain.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from batchor.version import __version__, install_origin

LOG_ENV = "BATCHOR_LOG"
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_HANDLER_NAME = "batchor-cli"


class _Settings:
    """What the shared options decided for this process (the CLI runs one command per process)."""

    quiet = False


settings = _Settings()


def is_quiet() -> bool:
    return settings.quiet


def log_level(verbose: int, quiet: bool, env: str | None) -> int:
    """The level the flags (first) or `BATCHOR_LOG` ask for; a bad `BATCHOR_LOG` is a usage error."""
    if quiet:
        return logging.ERROR
    if verbose:
        return logging.DEBUG if verbose > 1 else logging.INFO
    if not env:
        return logging.WARNING
    value = env.strip().upper()
    if value.isdigit():
        return int(value)
    level = logging.getLevelName(value)
    if not isinstance(level, int):
        raise typer.BadParameter(
            f"{LOG_ENV}={env!r} is not a log level; use DEBUG, INFO, WARNING, ERROR or a number", param_hint=LOG_ENV
        )
    return level


def configure_logging(level: int) -> None:
    """One stderr handler on the `batchor` logger (idempotent: CliRunner calls commands repeatedly)."""
    logger = logging.getLogger("batchor")
    for handler in list(logger.handlers):
        if handler.get_name() == _HANDLER_NAME:
            logger.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False


def _show_version(value: bool) -> None:
    if value:
        import batchor

        typer.echo(f"batchor {__version__}")
        typer.echo(f"installed from: {install_origin()}")
        typer.echo(f"package: {Path(batchor.__file__).parent}")
        raise typer.Exit()


def common_options(
    version: Optional[bool] = typer.Option(
        None, "--version", callback=_show_version, is_eager=True, help="Print the version and exit"
    ),
    verbose: int = typer.Option(
        0, "--verbose", "-v", count=True, help=f"Log more: -v info, -vv debug (default: ${LOG_ENV} or warnings)"
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only errors and the data asked for"),
) -> None:
    """Run LLM prompts over every row of a dataset, declaratively."""
    if verbose and quiet:
        raise typer.BadParameter("-v and -q contradict each other; give one", param_hint="--quiet")
    settings.quiet = quiet
    configure_logging(log_level(verbose, quiet, os.environ.get(LOG_ENV)))


def print_json(data: Any) -> None:
    """What a command answers with `--json`: one indented JSON document on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
