"""The API keys a spec's steps need, resolved like a plan resolves them (the job's model block, each
step's override) but without reading the input or any key: `batchor keys` lists them and says
which are set, so CI names a missing secret before a paid run starts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from batchor.plan.steps import Overrides, resolve_steps
from batchor.providers.keys import key_envs
from batchor.spec.load import LoadedSpec


@dataclass(frozen=True)
class KeyNeed:
    """One key a spec needs: any one of `envs` is enough; `steps` are the steps that use it."""

    spec: str
    provider: str
    envs: tuple[str, ...]
    steps: tuple[str, ...]
    set_as: str | None  # the variable that holds it here, None: missing

    @property
    def present(self) -> bool:
        return self.set_as is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "provider": self.provider,
            "env": list(self.envs),
            "steps": list(self.steps),
            "set": self.present,
            "set_as": self.set_as,
        }


def needed_keys(loaded: LoadedSpec, environ: Mapping[str, str]) -> list[KeyNeed]:
    """One entry per (provider, key variables) the spec's steps use, in step order: each step's
    own model, then its fallback models and its `escalate.to` model (a run may need any of them,
    and apply checks every one before the first call)."""
    steps, _ = resolve_steps(loaded, Overrides())
    grouped: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for step in steps:
        if step.local:
            continue
        models = [(step, step.name), *((f, f"{step.name} (fallback)") for f in step.fallbacks)]
        if step.escalation is not None:
            models.append((step.escalation, f"{step.name} (escalate)"))
        for model, use in models:
            envs = key_envs(model.provider, model.api_key_env, model.provider_options)
            if envs and use not in grouped.setdefault((model.provider, envs), []):
                grouped[(model.provider, envs)].append(use)
    return [
        KeyNeed(
            loaded.source, provider, envs, tuple(names), next((e for e in envs if environ.get(e, "").strip()), None)
        )
        for (provider, envs), names in grouped.items()
    ]
