"""The limits one apply runs under, as a typed object. Defaults live in one place: the spec's
`LimitsSpec` (spec/model.py); a saved plan's limits and the caller's overrides go on top."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from batchor.spec.model import LimitsSpec


@dataclass(frozen=True, slots=True)
class RunLimits:
    concurrency: int
    max_attempts: int
    request_timeout_s: float
    rpm: int | None
    tpm: int | None
    batch_max_requests: int | None
    batch_max_bytes: int | None
    batch_enqueued_tokens: int | None
    batch_poll_s: float
    batch_poll_max_s: float
    lease_s: float | None = None  # shared runs: how long a silent worker keeps its claims
    pipeline: bool | None = None  # False: run realtime steps in waves instead of pipelining them
    max_cost_usd: float | None = None  # the spec's budget (the lower of it and --max-cost applies)
    on_truncation: str = "fail"  # fail | reask (see engine/recorder.py ReaskPolicy)
    truncation_max_tokens: int | None = None

    @classmethod
    def merged(cls, *layers: Mapping[str, Any] | LimitsSpec) -> RunLimits:
        """The spec's defaults, then each layer on top (None keeps the default of a required limit);
        a layer is a plan's or a spec's limits, or a mapping of overrides."""
        values: dict[str, Any] = LimitsSpec().model_dump()
        for layer in (x.model_dump() if isinstance(x, LimitsSpec) else x for x in layers):
            values.update({k: v for k, v in layer.items() if v is not None or k not in _REQUIRED})
        chosen: dict[str, Any] = {name: values.get(name) for name in _FIELDS}
        return cls(**chosen)

    def without_rate_limits(self) -> RunLimits:
        """A rehearsal (mock) runs at full speed: rpm/tpm describe the real provider."""
        return RunLimits.merged({name: getattr(self, name) for name in _FIELDS}, {"rpm": None, "tpm": None})


_FIELDS = [f.name for f in fields(RunLimits)]
_REQUIRED = {"concurrency", "max_attempts", "request_timeout_s", "batch_poll_s", "batch_poll_max_s"}
