"""Where an output file must never go: over the state that holds the answers (its cache, ledger
and history would be replaced by the results), or over an input file or the spec.

`validate` checks the inputs; `plan`, `apply` and `export` check the state too, before anything
is written.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from batchor.errors import OutputConflictError


def check_output_path(
    target: str | Path, *, state_location: str | None = None, inputs: Iterable[str | Path] = (), spec: str | None = None
) -> None:
    """Raise `output_conflict` when `target` is the state file (or its WAL), an input or the spec."""
    out = Path(target)
    if state_location and "://" not in state_location:
        state = Path(state_location)
        if _same(out, state) or _same(out, Path(f"{state}.wal")):
            raise OutputConflictError(
                f"output path {out} is the state file: writing the results there would replace the cached "
                "answers, the spend ledger and the run history",
                hint="set output.path (or --output) to another file, e.g. out/results.parquet",
            )
    for name, kind in [*((i, "input file") for i in inputs), *([(spec, "spec file")] if spec else [])]:
        if _same(out, Path(name)):
            raise OutputConflictError(
                f"output path {out} is the {kind} {name}: writing the results there would overwrite it",
                hint="set output.path (or --output) to another file, e.g. out/results.csv",
            )


def _same(a: Path, b: Path) -> bool:
    """Whether two paths name one file (a link or another spelling of the path included)."""
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.normcase(a.expanduser().resolve()) == os.path.normcase(b.expanduser().resolve())
