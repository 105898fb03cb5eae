"""The drafter's model call: an ordinary one-row batchor job, so it goes through the same provider
adapter, retries, structured output, local validation and ledger as any run (`batchor runs`
lists it, with its cost, as `batchor-draft`).

The answer is constrained by `draft_schema()`: `{spec, output_schema}` where `spec` follows the
spec format's own JSON Schema (the one committed in schemas/, generated from the models).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from batchor import api
from batchor.draft.sample import DataSample
from batchor.errors import InvalidOutputError
from batchor.spec.json_schema import spec_json_schema
from batchor.state import find_state

JOB_NAME = "batchor-draft"
MAX_TOKENS = 4096  # a spec and its schema: far below this
DRAFT_STEP = "draft"


@dataclass(frozen=True)
class DraftAnswer:
    """One answer of the drafter, and what asking cost."""

    spec: dict[str, Any]
    output_schema: dict[str, Any]
    run_id: str
    cost_usd: float


def draft_schema() -> dict[str, Any]:
    """The drafter's answer: a spec (by the spec format's own schema) and its output schema."""
    spec = spec_json_schema()
    defs = spec.pop("$defs")
    for key in ("$schema", "$id"):
        spec.pop(key, None)
    return {
        "type": "object",
        "properties": {
            "spec": {"$ref": "#/$defs/JobSpec"},
            "output_schema": {"type": "object", "description": "JSON Schema of one answer of the result step"},
        },
        "required": ["spec", "output_schema"],
        "additionalProperties": False,
        "$defs": {**defs, "JobSpec": spec},
    }


@lru_cache(maxsize=1)
def system_prompt() -> str:
    return resources.files("batchor.draft").joinpath("system.md").read_text(encoding="utf-8")


def request_text(
    task: str,
    sample: DataSample,
    model: tuple[str, str],
    previous: str = "",
    errors: str = "",
    attempt: tuple[int, int] = (1, 1),
) -> str:
    """The user message: the task, the data as shown, the model to use, and a rejected draft's problems
    (with the attempt's number, so a re-ask is a new request even when the model repeats itself)."""
    template = resources.files("batchor.draft").joinpath("request.md.jinja").read_text(encoding="utf-8")
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    return env.from_string(template).render(
        task=task.strip(),
        file_name=sample.path.name,
        rows_total=f"{sample.rows_total:,}",
        columns=sample.columns,
        sample_rows=sample.rows_as_json(),
        provider=model[0],
        model=model[1],
        previous=previous,
        errors=errors,
        attempt=attempt[0],
        attempts=attempt[1],
    )


def ask_drafter(
    drafter: str,
    user_text: str,
    *,
    spec_dir: Path,
    fresh: bool = False,
    state: str | None = None,
    max_cost: float | None = None,
) -> DraftAnswer:
    """Ask `drafter` (provider:name) once, as a one-row run recorded in the project's state; with
    `max_cost`, refused (cost_limit) before the call when its upper bound is above it, like apply."""
    with tempfile.TemporaryDirectory(prefix="batchor-draft-") as tmp:
        row_file = Path(tmp) / "request.jsonl"
        row_file.write_text(json.dumps({"system": system_prompt(), "user": user_text}) + "\n", encoding="utf-8")
        provider, name = drafter.split(":", 1)
        job = {
            "version": 1,
            "name": JOB_NAME,
            "input": {"path": str(row_file)},
            "model": {"provider": provider, "name": name, "params": {"temperature": 0, "max_tokens": MAX_TOKENS}},
            "steps": {
                DRAFT_STEP: {
                    "system": "{{ row.system }}",
                    "prompt": "{{ row.user }}",
                    "output": {"schema": draft_schema(), "name": "batchor_draft"},
                }
            },
            "output": {"path": str(Path(tmp) / "answer.jsonl")},
            "limits": {"concurrency": 1, "max_attempts": 3, "max_output_tokens": MAX_TOKENS},
        }
        location = find_state(state, None, spec_dir).location
        result = api.apply(
            job,
            state=location,
            refresh={DRAFT_STEP} if fresh else set(),
            handle_signals=False,
            progress=False,
            max_cost=max_cost,
        )
        return _answer(result, Path(tmp) / "answer.jsonl")


def _answer(result: Any, path: Path) -> DraftAnswer:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    row = rows[0] if rows else {}
    if result.status != "succeeded" or row.get("_status") != "succeeded":
        raise InvalidOutputError(
            f"the drafter gave no usable answer (run {result.run_id}, {result.status}): "
            f"{row.get('_error') or result.stop_reason or 'no answer'}",
            hint=f"see `batchor status {result.run_id}`; try again or another --model",
        )
    spec, schema = _field(row, "spec"), _field(row, "output_schema")
    return DraftAnswer(spec=spec, output_schema=schema, run_id=result.run_id, cost_usd=result.cost_usd)


def _field(row: dict[str, Any], name: str) -> dict[str, Any]:
    value = row.get(f"{DRAFT_STEP}.{name}")
    if isinstance(value, str):
        value = json.loads(value)
    return value if isinstance(value, dict) else {}
