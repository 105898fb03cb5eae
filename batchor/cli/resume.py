"""The command that continues an interrupted or stopped `apply`: the one the user typed.

Rebuilt from the options Click parsed off the command line (not from defaults or the
environment), so `--max-cost`, `--state`, `--model` and the rest come back exactly, shell-quoted.
A password in a PostgreSQL URL is hidden: the hint is printed to terminals and CI logs.
"""

from __future__ import annotations

import shlex
from typing import Any

_HIDDEN = "***"


def continue_command(ctx: Any, without: set[str] | frozenset[str] = frozenset()) -> str:
    """`batchor apply ...` with the arguments and options the user gave, in declaration order,
    except the parameters named in `without` (say `no_wait` to collect batches)."""
    words = ["batchor", ctx.info_name]
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name)
        if param.name in without or source is None or source.name != "COMMANDLINE":
            continue
        words.extend(_words(param, ctx.params[param.name]))
    return shlex.join(words)


def _words(param: Any, value: Any) -> list[str]:
    if param.param_type_name == "argument":
        return [_shown(param.name, value)]
    flag = param.opts[0]
    if getattr(param, "is_flag", False):
        return [flag] if value else list(param.secondary_opts[:1])
    values = value if getattr(param, "multiple", False) else [value]
    return [word for v in values for word in (flag, _shown(param.name, v))]


def _shown(name: str, value: Any) -> str:
    text = str(value).removesuffix(".0") if isinstance(value, float) else str(value)  # 5, not 5.0
    if name == "state" and "://" in text:
        return hide_password(text)
    return text


def hide_password(url: str) -> str:
    """`postgresql://user:***@host/db`: the URL without its password (unchanged if it has none)."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy can read: show only its scheme
        return url.split("://", 1)[0] + "://" + _HIDDEN


def budget_continue(reason: str | None, command: str) -> str:
    """After a budget stop: the command alone grants nothing (a budget covers the job across its
    runs), so say how to raise the budget that stopped it, then the command."""
    from batchor.api import SPEC_SOURCE, raise_hint

    source = SPEC_SOURCE if SPEC_SOURCE in (reason or "") else None
    return f"The budget covers this job across its runs: {raise_hint(source)}. Command: {command}"
