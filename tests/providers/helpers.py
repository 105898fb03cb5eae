"""Helpers for provider tests: JSON cases, requests, and specs pointed at one provider."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from batchor.providers.base import LLMRequest
from tests.conftest import make_spec

CASES = Path(__file__).resolve().parents[1] / "cases" / "providers"
SCHEMA = {
    "type": "object",
    "properties": {"sentiment": {"type": "string"}, "score": {"type": "integer"}},
    "required": ["sentiment", "score"],
    "additionalProperties": False,
}


def case(name: str) -> dict[str, Any]:
    return json.loads((CASES / name).read_text(encoding="utf-8"))


def request(schema: dict[str, Any] | None = None, *, system: str | None = "Classify.", **params: Any) -> LLMRequest:
    messages = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": "Review: great"}
    ]
    return LLMRequest("k1", "some-model", tuple(messages), {"max_tokens": 50, **params}, schema, "classify")


def provider_spec(
    folder: Path, provider: str, model: str, *, rows: int = 6, schema: Any = "default", **model_block: Any
) -> Path:
    """make_spec() with the model block set to `provider`/`model` (plus e.g. api, base_url)."""
    kwargs = {} if schema == "default" else {"schema": schema}
    path = make_spec(folder, rows=rows, **kwargs)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["model"].update(provider=provider, name=model, **model_block)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path
