"""Plans carry their powers: which hosts they call, with which key variable, what they read and write.

A plan file is content-hashed, which proves it is intact, not who made it: someone can edit one
and hash it again. So `plan` seals every plan with a key only this state holds (HMAC-SHA256 of
the plan id; the key is a 0600 file beside a DuckDB state, `~/.batchor/plan.key` for a
PostgreSQL one, never inside a plan), and `apply PLANFILE` runs a plan without asking only when
the seal is this state's. Any other plan (made on another machine, edited, or from a pull
request) is refused with its powers listed, until `--trust-plan` says someone read them; `plan`
and `apply` print the powers of every plan they show.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from batchor.errors import UntrustedPlanError
from batchor.file_modes import private_dir
from batchor.plan.endpoint import OFFICIAL_URLS
from batchor.providers import provider_info, provider_key_envs

KEY_FILE = "plan.key"


def key_path(location: str) -> Path:
    """Where the sealing key of the state at `location` lives (a file or a database URL)."""
    if "://" in location:
        return Path.home() / ".batchor" / KEY_FILE
    return Path(location).parent / KEY_FILE


def seal(plan_id: str, location: str) -> str:
    """The seal of `plan_id` by the state at `location` (its key made on first use, owner-only)."""
    path = key_path(location)
    key = _read_key(path)
    if key is None:
        private_dir(path.parent)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(32))
        key = _read_key(path)
    return _mac(key or b"", plan_id)


def sealed_here(header: Any, location: str) -> bool:
    """Whether the plan carries the seal of the state at `location`."""
    key = _read_key(key_path(location))
    if key is None or not header.seal:
        return False
    return hmac.compare_digest(_mac(key, header.plan_id), header.seal)


def check_trusted(header: Any, location: str, trust: bool) -> None:
    """Refuse a plan this state did not seal, unless the caller says its powers were read."""
    if trust or sealed_here(header, location):
        return
    listed = "\n".join(powers_lines(header))
    raise UntrustedPlanError(
        f"plan {header.plan_id} was not made with this state ({location}): it may call other hosts, "
        f"send another key variable or read and write other files than your spec would. Its powers:\n{listed}",
        hint="re-plan from the spec (`batchor plan SPEC`), or, after reading the powers above, "
        "add --trust-plan (never for a plan from a pull request)",
    )


def powers(header: Any, output: Any = None) -> dict[str, Any]:
    """What running the plan may do: {"calls": [{host, key_env, steps}], "reads": [...], "writes": [...]};
    `output`: where `--output` sends the results instead."""
    calls: dict[tuple[str, str | None], list[str]] = {}
    reads = list(header.input.files)
    for step in header.steps:
        if step.provider == "sql":
            reads += sorted(step.sql_files)
        elif step.provider != "mock":
            calls.setdefault((_host(step), _key_env(step)), []).append(step.name)
        if step.attachments:
            reads.append(f"{step.attachments_folder or header.base_dir}/ (attachments)")
    writes = [str(output or header.output.path)] + ([header.state_location] if header.state_location else [])
    return {
        "calls": [{"host": h, "key_env": k, "steps": s} for (h, k), s in calls.items()],
        "reads": sorted(set(reads)),
        "writes": writes,
    }


def powers_lines(header: Any, output: Any = None) -> list[str]:
    """The powers as the plan text prints them."""
    found = powers(header, output)
    lines = [
        f"  calls       {c['host']} with {c['key_env'] or 'no key'} ({', '.join(c['steps'])})" for c in found["calls"]
    ]
    lines.append(f"  reads       {', '.join(found['reads'])}")
    lines.append(f"  writes      {', '.join(found['writes'])}")
    return lines


def _host(step: Any) -> str:
    url = step.endpoint or step.base_url or provider_info(step.provider).base_url or OFFICIAL_URLS.get(step.provider)
    return urlsplit(url).netloc if url else step.provider


def _key_env(step: Any) -> str | None:
    if step.api_key_env:
        return str(step.api_key_env)
    own = provider_key_envs(step.provider)
    return " or ".join(own) if own else None


def _read_key(path: Path) -> bytes | None:
    """The key, when the file is this user's and owner-only (a key checked out of a repository is
    0644 and never counts)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    if stat.st_mode & 0o077 or stat.st_uid != os.getuid():
        return None
    return path.read_bytes().strip() or None


def _mac(key: bytes, plan_id: str) -> str:
    return hmac.new(key, plan_id.encode(), hashlib.sha256).hexdigest()
