"""Models that differ: how often each gets a labelled answer right, and how long each takes.

`batchor compare` runs one sample on several models and must tell them apart, so the fake can
answer per model (config `model_accuracy`: {model: share right}, `model_latency_ms`: {model: ms}).
A row carries its true label in its text as `[truth: <value>]`; a structured answer's first enum
field that can take that value gets it with the model's probability, drawn from a CRC of the model
and the request's text (the same model answers the same row alike on every run), else another
value of the enum. Requests without a truth marker, text answers and unlisted models are answered
as usual.
"""

from __future__ import annotations

import dataclasses
import json
import re
import zlib
from typing import Any

TRUTH = re.compile(r"\[truth:\s*([^\]\s]+)\s*\]")


def graded(call: Any, answer: Any, config: dict[str, Any]) -> Any:
    """`answer` with its labelled field right or wrong as `call.model`'s accuracy draws."""
    accuracy = (config.get("model_accuracy") or {}).get(call.model)
    truth = TRUTH.search(call.input_text) if accuracy is not None and call.schema is not None else None
    if truth is None:
        return answer
    value = answer.value if answer.value is not None else _parsed(answer.text)
    field = _labelled_field(call.schema, truth.group(1))
    if not isinstance(value, dict) or field is None:
        return answer
    options = call.schema["properties"][field]["enum"]
    draw = zlib.crc32(f"{call.model}|{call.input_text}".encode()) / 2**32
    wrong = [o for o in options if o != truth.group(1)]
    label = truth.group(1) if draw < float(accuracy) or not wrong else wrong[int(draw * 1000) % len(wrong)]
    value = {**value, field: label}
    text = json.dumps(value)
    return dataclasses.replace(answer, text=text, value=value if answer.value is not None else None)


def latency_ms(config: dict[str, Any], model: str | None) -> float:
    """The model's own latency, else the fake's `latency_ms`."""
    own = (config.get("model_latency_ms") or {}).get(model) if model else None
    return float(own if own is not None else config["latency_ms"])


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _labelled_field(schema: Any, truth: str) -> str | None:
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    return next((name for name, prop in props.items() if truth in (prop.get("enum") or [])), None)
