"""`draft --mock`: a draft built from the columns alone, offline and free.

No model reads the task, so this is a rehearsal of the draft flow (validate, rehearse, plan,
write), not a draft of the task: one step shows every column to the model with the task as its
instruction, and answers `{answer, reason}`. The model named in it is the one a real draft would
use, so the plan prices the real thing.
"""

from __future__ import annotations

import re
from typing import Any

from batchor.draft.sample import DataSample

SCHEMA_FILE = "output.schema.json"  # the name the drafter's prompt tells the model to use


def template_draft(task: str, sample: DataSample, model: tuple[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(spec, output schema) for `task` over the sample's columns."""
    name = job_name(task)
    lines = [f"{column}: {{{{ {row_ref(column)} }}}}" for column in sample.column_names]
    keys = [c.name for c in sample.columns if c.unique]
    spec = {
        "version": 1,
        "name": name,
        "input": {"path": "DATA", **({"key": keys[0]} if keys else {})},
        "model": {"provider": model[0], "name": model[1], "params": {"temperature": 0, "max_tokens": 300}},
        "steps": {
            "answer": {
                "system": f"You work through a dataset one row at a time. The task: {task.strip()}",
                "prompt": "\n".join(["Row:", *lines, "", "Answer for this row only."]),
                "output": {"schema": SCHEMA_FILE},
            }
        },
        "output": {"path": f"out/{name}.csv"},
    }
    schema = {
        "type": "object",
        "properties": {
            "answer": {"type": "string", "description": f"The answer for this row: {task.strip()}"},
            "reason": {"type": "string", "description": "One short sentence saying why"},
        },
        "required": ["answer", "reason"],
        "additionalProperties": False,
    }
    return spec, schema


_FILLER = frozenset(
    [
        "a",
        "an",
        "the",
        "each",
        "every",
        "all",
        "of",
        "for",
        "to",
        "by",
        "in",
        "on",
        "at",
        "from",
        "with",
        "and",
        "or",
        "into",
        "as",
        "is",
        "are",
        "be",
        "this",
        "that",
        "these",
        "those",
        "its",
        "their",
        "it",
        "per",
        "row",
        "rows",
        "one",
        "its",
        "which",
        "what",
        "whether",
        "if",
    ]
)


def job_name(task: str) -> str:
    """A short job name from the task's first content words: `classify-reviews-sentiment` for
    "Classify each of the reviews by sentiment" (not the sentence slugged)."""
    words = [w for w in re.findall(r"[A-Za-z0-9]+", task.lower()) if w not in _FILLER][:3]
    return "-".join(words)[:32].strip("-") or "drafted-job"


def row_ref(column: str) -> str:
    """`row.text`, or `row["my column"]` for a name that is not an identifier."""
    if column.isidentifier():
        return f"row.{column}"
    return 'row["' + column.replace("\\", "\\\\").replace('"', '\\"') + '"]'
