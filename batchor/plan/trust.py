"""Plans carry their powers: which hosts they call, with which key variable, what they read and write.

A plan file is content-hashed, which proves it is intact, not who made it: someone can edit one
and hash it again. So `plan` seals every plan with a key only this state holds (HMAC-SHA256 of
the plan id; the key is a 0600 file beside a DuckDB state, `~/.batchor/plan.key` for a
PostgreSQL one, never inside a plan), and `apply PLANFILE` runs a plan without asking only when
the seal is this state's. Any other plan (made on another machine, edited, or from a pull
request) runs only when the spec it names, in the working folder (the repository), compiles now
to a plan with no other power (`repository_spec`, `power_differences`): the plan a CI job made
and another job applies. Else it is refused with its powers listed (and which differ from the
spec's), until `--trust-plan` says someone read them; `plan` and `apply` print the powers of
every plan they show.
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
from batchor.providers import CREDENTIAL_CHAINS, base_url, provider_info, provider_key_envs
from batchor.providers.facts import provider_facts

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
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return ""  # a key file that does not count (readable by others, not ours) seals nothing
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


def check_trusted(header: Any, location: str, trust: bool, spec_header: Any = None) -> None:
    """Refuse a plan this state did not seal, unless the caller says its powers were read or
    `spec_header` (the plan the repository's spec compiles to now) has every power it has."""
    if trust or sealed_here(header, location):
        return
    listed = "\n".join(powers_lines(header))
    if spec_header is not None:
        differs = power_differences(header, spec_header)
        if not differs:
            return
        raise UntrustedPlanError(
            f"plan {header.plan_id} was not made with this state ({location}) and has powers its spec "
            f"{header.spec_source} would not give it: {'; '.join(differs)}. Its powers:\n{listed}",
            hint="re-plan from the spec (`batchor plan SPEC`), or, after reading the powers above, "
            "add --trust-plan (never for a plan from a pull request)",
        )
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
        if step.local:
            reads += sorted(step.sql_files)
        elif not provider_facts(step.provider).offline:
            calls.setdefault((_host(step), _key_env(step)), []).append(step.name)
        if step.attachments:
            reads.append(f"{step.attachments_folder or header.base_dir}/ (attachments)")
    writes = [str(output or header.output.path)] + ([header.state_location] if header.state_location else [])
    return {
        "calls": [{"host": h, "key_env": k, "steps": s} for (h, k), s in calls.items()],
        "reads": sorted(set(reads)),
        "writes": writes,
    }


def power_differences(header: Any, spec_header: Any) -> list[str]:
    """Each power of the plan `header` that the spec's plan `spec_header` does not have, named
    ("calls evil.example with AWS_SECRET_ACCESS_KEY (the spec: api.openai.com with OPENAI_API_KEY)");
    empty when the plan can do nothing the spec could not."""
    mine, spec = powers(header), powers(spec_header)
    found = []
    spec_calls = {(c["host"], c["key_env"]) for c in spec["calls"]}
    said = ", ".join(f"{h} with {k or 'no key'}" for h, k in sorted(spec_calls, key=str)) or "no calls"
    for call in mine["calls"]:
        if (call["host"], call["key_env"]) not in spec_calls:
            found.append(f"calls {call['host']} with {call['key_env'] or 'no key'} (the spec: {said})")
    for kind in ("reads", "writes"):
        extra = sorted(set(mine[kind]) - set(spec[kind]))
        if extra:
            found.append(f"{kind} {', '.join(extra)} (the spec: {', '.join(spec[kind]) or 'nothing'})")
    return found


def repository_spec(header: Any, root: Path) -> Path | None:
    """The spec file a plan names, when it is inside `root` (the working folder: the checked-out
    repository). A plan naming a file elsewhere has no matching spec: it must be trusted by hand."""
    source = Path(header.spec_source)
    candidates = [source] if source.is_absolute() else [root / source, root / Path(header.base_dir).name / source]
    root = root.resolve()
    for candidate in candidates:
        path = candidate.resolve()
        if path.is_file() and path.is_relative_to(root):
            return path
    return None


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
    url = step.endpoint or base_url(step.provider, step.base_url) or provider_info(step.provider).official_url
    return urlsplit(url).netloc if url else step.provider


def _key_env(step: Any) -> str | None:
    if step.api_key_env:
        return str(step.api_key_env)
    own = provider_key_envs(step.provider)
    return " or ".join(own) if own else CREDENTIAL_CHAINS.get(step.provider)


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
