"""The files a SQL step's query reads, fingerprinted at plan time so a saved plan replays exactly.

A SQL step runs during apply (it needs the answers of earlier steps), so a file it joins
(`read_csv('teams.csv')`, `'data/*.parquet'`) is read then, not when the plan was made. Every
string literal of the query that names an existing file (relative paths from the spec's folder,
as the query resolves them; globs expanded) is hashed into the step's plan; `apply PLANFILE`
refuses the plan when one of them changed or a glob matches other files, as it refuses a plan
whose input changed.
"""

from __future__ import annotations

import glob
from pathlib import Path

from batchor.plan.model import PlanHeader
from batchor.plan.plan_file import file_sha256
from batchor.spec.sql_guard import string_literals


def referenced_files(sql: str, base_dir: Path) -> dict[str, str]:
    """{absolute path: sha256} of the files the query's string literals name."""
    found: dict[str, str] = {}
    for literal in string_literals(sql):
        path = Path(literal).expanduser()
        full = str(path if path.is_absolute() else base_dir / path)
        matches = glob.glob(full, recursive=True) if any(ch in literal for ch in "*?[") else [full]
        for match in sorted(matches):
            if Path(match).is_file():
                found[str(Path(match).resolve())] = file_sha256(Path(match))
    return found


def changed_sql_file(header: PlanHeader) -> str | None:
    """A reason when the files a SQL step of the plan reads are not the ones it was made with:
    one changed or is gone, or a glob of the query now matches another file."""
    for step in header.steps:
        if not step.local:
            continue
        now = referenced_files(step.prompt, Path(header.base_dir))
        if now == step.sql_files:
            continue
        path = next(p for p in sorted(set(now) | set(step.sql_files)) if now.get(p) != step.sql_files.get(p))
        what = "is gone" if path not in now else "is new" if path not in step.sql_files else "changed"
        return f"steps.{step.name}.sql reads {path}, which {what} since the plan was made"
    return None
