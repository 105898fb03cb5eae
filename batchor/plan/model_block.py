"""Which model a step uses, and whether its model block is sound: the spec's model, a step's own
block, `--model provider:name` and `--mock` resolved into one `ModelSpec` (a provider change drops
the settings bound to the old provider), then the model, its options, params and connection
checked once per block (plan/steps.py plans the step from it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from batchor.errors import Problems, SpecError
from batchor.plan.endpoint import check_connection
from batchor.plan.known_models import check_model
from batchor.providers import provider_info
from batchor.providers.clouds import priced_as
from batchor.providers.facts import provider_facts
from batchor.providers.options import check_options
from batchor.providers.params import check_params
from batchor.spec.load import LoadedSpec
from batchor.spec.model import ModelSpec


@dataclass(frozen=True)
class Overrides:
    """Command-line changes to a spec: `--model provider:name`, `--mock`, `--mode`."""

    model: str | None = None
    mock: bool = False
    mode: str | None = None


_PROVIDER_BOUND = (
    "base_url",
    "api_key_env",
    "allow_key_env",
    "api",
    "price",
    "custom",
    "options",
)  # dropped on a provider change


def check_model_block(
    loaded: LoadedSpec, step: str, model: ModelSpec, overrides: Overrides, checked: set[tuple[str, ...]]
) -> None:
    """The model exists (or the spec says it is custom or priced); its options and params are the
    provider's. All three are checked, so one pass reports each.

    The spec's provider is checked, also under --mock: the rehearsal is of the real run. Each
    block is checked once, so a job-level mistake is one problem, not one per step."""
    own = getattr(loaded.spec.steps[step], "model", None)  # an LLM step's model override
    at_step = own is not None and (own.name is not None or own.provider is not None)
    where = (
        "--model" if overrides.model else at(loaded, ("steps", step, "model", "name") if at_step else ("model", "name"))
    )
    found = Problems()
    if first_time(checked, ("model", where, model.provider, model.name)):
        with found.check():
            check_model(
                *priced_as(model.provider, model.name, model.options),
                custom=model.custom,
                priced=model.price is not None,
                where=where,
                serves=provider_facts(model.provider).deployments and "model" not in model.options,
            )
    options_at = (
        ("steps", step, "model", "options") if own is not None and own.options is not None else ("model", "options")
    )
    if model.options and first_time(checked, ("options", *options_at, model.provider)):
        with found.check():
            check_options(model.provider, model.options, at(loaded, options_at))
    params_at = (
        ("steps", step, "model", "params") if own is not None and own.params is not None else ("model", "params")
    )
    if first_time(checked, ("params", *params_at, model.provider)):
        official = provider_info(model.provider).first_party and model.base_url is None
        with found.check():
            check_params(model.provider, model.params, lambda key: at(loaded, (*params_at, key)), exact=official)
    block = ("steps", step, "model") if own is not None else ("model",)
    with found.check():
        check_connection(model, lambda key: at(loaded, (*block, key)))
    found.raise_all()


def first_time(checked: set[tuple[str, ...]], what: tuple[str, ...]) -> bool:
    """Whether `what` is checked for the first time (and remember it)."""
    if what in checked:
        return False
    checked.add(what)
    return True


def at(loaded: LoadedSpec, path: tuple[Any, ...]) -> str:
    """A spec key for a message: its `file:line` and its dotted path."""
    return f"{loaded.where(*path)}: {'.'.join(path)}"


@dataclass(frozen=True)
class Switch:
    """A model override naming another provider and model (what `effective_model` applies)."""

    provider: str
    name: str

    def model_dump(self, exclude_none: bool = True) -> dict[str, Any]:
        return {"provider": self.provider, "name": self.name}


def effective_model(base: ModelSpec, override: Any, overrides: Overrides) -> ModelSpec:
    data = base.model_dump(exclude_none=True)
    if override is not None:
        changes = override.model_dump(exclude_none=True)
        if "provider" in changes and changes["provider"] != base.provider:
            for key in _PROVIDER_BOUND:
                data.pop(key, None)
        data.update(changes)
    if overrides.model:
        provider, _, name = overrides.model.partition(":")
        if not name:
            raise SpecError(f"--model '{overrides.model}' must be provider:model, e.g. openai:gpt-4.1-mini")
        if provider != data["provider"]:
            for key in _PROVIDER_BOUND:
                data.pop(key, None)
        data.update(provider=provider, name=name)
    return ModelSpec.model_validate(data)
