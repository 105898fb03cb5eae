"""The base side of a cost diff: the spec as it was, from a saved plan file or a git revision.

Both come down to a spec text and the folder its relative paths start from, so the base is compiled
exactly like the head, against the same data (the input files as they are now): what differs is
what the spec says, not which rows happen to be on disk.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from batchor.errors import CompareBaseError
from batchor.plan.plan_file import load_plan


@dataclass(frozen=True)
class Base:
    """The spec at the base: its text (None: the spec did not exist there) and where it came from."""

    label: str  # how the user named it
    kind: str  # plan | git
    text: str | None
    base_dir: Path


def resolve_base(base: str | Path, spec: Path) -> Base:
    """A saved plan file (the spec it was planned from) or a git revision of `spec`."""
    path = Path(base)
    if path.is_file():
        plan = load_plan(path)
        return Base(str(base), "plan", plan.header.spec_text, Path(plan.header.base_dir))
    return Base(str(base), "git", _git_text(str(base), spec), spec.resolve().parent)


def _git_text(revision: str, spec: Path) -> str | None:
    """`git show REV:./spec` run in the spec's folder; None when the revision lacks the spec (a
    spec the pull request adds)."""
    folder = spec.resolve().parent
    if _git(folder, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}").returncode != 0:
        raise CompareBaseError(
            f"--compare-to {revision!r}: not a saved plan file, nor a git revision of {folder}",
            hint="give a .plan file or a revision that exists here (`main`, `origin/main`, a commit); "
            "in CI, fetch the base branch first (actions/checkout with fetch-depth: 0)",
        )
    shown = _git(folder, "show", f"{revision}:./{spec.name}")
    if shown.returncode == 0:
        return shown.stdout
    listed = _git(folder, "ls-tree", "--name-only", revision, "--", f"./{spec.name}")
    if listed.returncode == 0 and not listed.stdout.strip():
        return None  # the revision exists but the spec does not: everything of it is new
    raise CompareBaseError(
        f"--compare-to {revision!r}: git could not read {spec.name} there: {shown.stderr.strip()}",
        hint="run inside the spec's git repository, with the revision fetched",
    )


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, text=True, check=False, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CompareBaseError(
            f"--compare-to: git could not run in {folder}: {exc}", hint="install git, or give a saved .plan file"
        ) from None
