"""The base of every spec model: unknown keys are errors, field docstrings are the JSON Schema's
descriptions, and a loaded spec is frozen."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)
