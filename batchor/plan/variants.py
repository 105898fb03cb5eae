"""Partial runs write beside the spec's output, never over it.

A pilot, `--limit`, `--sample`, a `--model` override, a `--mock` rehearsal or a run on data
handed to the Python API answers something other than what the spec describes, so its output file
is named after what it is (`out.limit-100.csv`, `out.sample-50.csv`, `out.model-gpt-4o.csv`,
`out.mock.csv`, `out.pilot.csv`, `out.data.csv`) and the spec's real output stays as the last full
run left it. `--output` still says exactly where to write.
"""

from __future__ import annotations

import re
from pathlib import Path

from batchor.providers.facts import provider_facts
from batchor.spec.model import JobSpec, SplitStep, SqlStep

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def variant_tags(
    *,
    pilot: int | None = None,
    limit: int | None = None,
    sample: int | None = None,
    model: str | None = None,
    data: bool = False,
    mock: bool = False,
) -> tuple[str, ...]:
    """What makes a run partial, as file-name parts, in a fixed order (empty: a full run)."""
    tags: list[str] = []
    if pilot is not None:
        tags.append("pilot")
    if limit is not None:
        tags.append(f"limit-{limit}")
    if sample is not None:
        tags.append(f"sample-{sample}")
    if model:
        name = model.split(":", 1)[-1]  # `provider:name`: the name says enough
        tags.append("model-" + (_UNSAFE.sub("-", name).strip("-.") or "override"))
    if mock:
        tags.append("mock")
    if data:
        tags.append("data")
    return tuple(tags)


def changes_the_model(spec: JobSpec, model: str | None) -> bool:
    """Whether `--model provider:name` answers with another model than the spec's LLM steps use:
    naming the model they already use changes nothing, so the run is a full one."""
    if not model:
        return False
    for step in spec.steps.values():
        if isinstance(step, (SqlStep, SplitStep)):
            continue  # a SQL or split step has no model
        own = step.model
        provider = (own.provider if own is not None else None) or spec.model.provider
        name = (own.name if own is not None else None) or spec.model.name
        if f"{provider}:{name}" != model:
            return True
    return False


def changes_the_provider(spec: JobSpec, mock: bool) -> bool:
    """Whether `--mock` answers in place of a real provider (a spec that is all `mock` already
    rehearses: its run is a full one)."""
    if not mock:
        return False
    return any(
        not provider_facts(_provider(spec, step) or "").offline
        for step in spec.steps.values()
        if not isinstance(step, (SqlStep, SplitStep))
    )


def _provider(spec: JobSpec, step: object) -> str | None:
    own = getattr(step, "model", None)
    return (own.provider if own is not None else None) or spec.model.provider


def variant_path(path: Path, tags: tuple[str, ...]) -> Path:
    """`out/results.csv` + (limit-100,) -> `out/results.limit-100.csv`."""
    if not tags:
        return path
    return path.with_name(f"{path.stem}.{'.'.join(tags)}{path.suffix}")


def variant_reason(tags: tuple[str, ...]) -> str:
    """Why the output is not the spec's, for the plan summary."""
    words = {"pilot": "a pilot", "data": "data given to the API", "mock": "--mock"}
    return ", ".join(words.get(t, "--" + t.split("-", 1)[0]) for t in tags)
