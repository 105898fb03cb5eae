"""Split steps: a long text cut into chunks, each chunk an element row `<row_key>#<n>`.

A split step is a fan-out computed in-process (like a SQL step: it costs nothing and its result
per row, the list of chunks, is stored like an answer), so everything after it runs once per
chunk exactly as after a SQL fan-out (plan/fanout_rows.py). Chunks are cut by tokens of the job
model's tokenizer (the counter the plan prices with), or at a delimiter with whole pieces packed
up to the size; each chunk can carry its neighbours (`gather:`) as context.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from batchor.fingerprint import canonical_json, request_prefix, sha256_hex
from batchor.plan.model import SplitPlan, StepPlan
from batchor.plan.step_kind import SQL_PROVIDER, local_price
from batchor.plan.tokens import TokenCounter, get_counter
from batchor.spec.inputs import ROW_KEY
from batchor.spec.model import JobSpec, SplitStep
from batchor.spec.templates import compile_step, make_environment, render_error, templates_folder

ELEMENT_SCHEMA = {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "n": {"type": "integer"},
        "of": {"type": "integer"},
        "before": {"type": "array", "items": {"type": "string"}},
        "after": {"type": "array", "items": {"type": "string"}},
    },
}


def split_step_plan(spec: JobSpec, name: str, step: SplitStep, refs: set[str]) -> StepPlan:
    """A split step's plan: local (no calls), a fan-out whose elements are chunks."""
    settings = SplitPlan(
        chunk_tokens=step.chunk_tokens,
        overlap_tokens=step.overlap_tokens,
        delimiter=step.delimiter,
        before=step.gather.before,
        after=step.gather.after,
        tokenizer=(spec.model.provider, spec.model.name),
    )
    prefix = request_prefix("split", "chunks", settings.model_dump(mode="json"), None)
    return StepPlan(
        name=name,
        provider=SQL_PROVIDER,
        model="split",
        kind="split",
        split=settings,
        params={},
        prompt=step.split,
        schema=ELEMENT_SCHEMA,
        depends_on=sorted(set(step.depends_on) | refs),
        fan_out=True,
        mode="realtime",
        price=local_price("split"),
        token_count_exact=True,
        max_tokens=0,
        expected_output_tokens=0,
        key_prefix=prefix + "\x1f" + sha256_hex(step.split),
    )


def split_rows(step: StepPlan, rows: pa.Table, upstream: dict[str, list[Any]], base_dir: str) -> dict[str, str]:
    """Per row key: the JSON list of its chunks (rows missing an upstream answer are left out)."""
    assert step.split is not None
    env = make_environment(templates_folder(Path(base_dir), None))
    template = compile_step(env, step.name, None, step.prompt, None, set(step.depends_on), prompt_key="split")
    counter = get_counter(*step.split.tokenizer)
    out: dict[str, str] = {}
    for i, record in enumerate(rows.to_pylist()):
        answers = {dep: values[i] for dep, values in upstream.items()}
        if any(value is None for value in answers.values()):
            continue
        key = record.pop(ROW_KEY)
        try:
            text = template.prompt.render({"row": record, **answers})
        except Exception as exc:  # noqa: BLE001 - any render failure names the step and row
            raise render_error(step.name, exc, key) from None
        out[key] = canonical_json(elements(cut(text, step.split, counter), step.split))
    return out


def cut(text: str, settings: SplitPlan, counter: TokenCounter) -> list[str]:
    """The chunks of `text`: token windows, or whole pieces between delimiters packed up to size."""
    if not text.strip():
        return []
    size, overlap = settings.chunk_tokens, settings.overlap_tokens
    if settings.delimiter is None:
        return counter.windows(text, size, overlap)
    chunks: list[list[str]] = []
    tokens: list[int] = []
    for piece in (p for p in text.split(settings.delimiter) if p.strip()):
        n = counter.count(piece)
        if n > size:  # longer than a chunk alone: cut by tokens
            chunks += [[part] for part in counter.windows(piece, size, overlap)]
            tokens += [size] * (len(chunks) - len(tokens))
            continue
        if not chunks or tokens[-1] + n > size:
            carried = _overlap(chunks[-1], counter, overlap, size - n) if chunks else []
            chunks.append([*carried, piece])
            tokens.append(sum(counter.count(p) for p in chunks[-1]))
        else:
            chunks[-1].append(piece)
            tokens[-1] += n
    return [settings.delimiter.join(chunk) for chunk in chunks]


def _overlap(previous: list[str], counter: TokenCounter, overlap: int, room: int) -> list[str]:
    """The last whole pieces of the chunk before, up to `overlap` tokens (and the room left)."""
    carried: list[str] = []
    total = 0
    for piece in reversed(previous[1:] if len(previous) > 1 else []):
        total += counter.count(piece)
        if total > min(overlap, room):
            break
        carried.insert(0, piece)
    return carried


def elements(chunks: list[str], settings: SplitPlan) -> list[dict[str, Any]]:
    """Each chunk as the element later steps see, with its gathered neighbours."""
    total = len(chunks)
    return [
        {
            "text": text,
            "n": n,
            "of": total,
            "before": chunks[max(0, n - 1 - settings.before) : n - 1],
            "after": chunks[n : n + settings.after],
        }
        for n, text in enumerate(chunks, 1)
    ]
