"""The provider clients of one apply, built before any call so that a missing key fails first.

A realtime step gets its SDK client now (steps configured alike share one). A batch-mode step
sends and collects through its batch client: that one is built now too (the key check, the same as
the batch lane would make) and handed to the step's first batch lane. Its realtime client is built
only if something asks for it (`DeferredProvider`): for OpenAI a second SDK client on the aiohttp
transport, with a TLS trust store of its own (~50 ms of CPU), that a batch step never sends
through.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from batchor.engine.limits import RunLimits
from batchor.engine.types import StepRuntime
from batchor.plan.model import StepPlan
from batchor.plan.plan_file import CompiledPlan
from batchor.plan.prices import ModelPrice
from batchor.plan.step_kinds import canonical_plan, judge_plan
from batchor.providers import create_provider, provider_info
from batchor.providers.base import CacheFeeSink, Completion, HoldsCaches, LLMRequest, Provider, ProviderConfig
from batchor.providers.batch import BatchProvider, create_batch_provider


class DeferredProvider:
    """A step's realtime client, built by its first use (a call, or any attribute read)."""

    def __init__(self, config: ProviderConfig) -> None:
        self._config = config
        self._built: Provider | None = None
        self.name = provider_info(config.provider).adapter  # the adapter's name, as its class says

    @property
    def built(self) -> bool:
        return self._built is not None

    def _provider(self) -> Provider:
        if self._built is None:
            self._built = create_provider(self._config)
        return self._built

    def __getattr__(self, attribute: str) -> Any:  # embed() and whatever else an adapter offers
        return getattr(self._provider(), attribute)

    async def complete(self, request: LLMRequest) -> Completion:
        return await self._provider().complete(request)

    async def aclose(self) -> None:
        if self._built is not None:
            await self._built.aclose()


def provider_config(step: StepPlan, timeout_s: float) -> ProviderConfig:
    """How to build a step's clients (realtime and batch): never a key, only where to read it."""
    return ProviderConfig(
        provider=step.provider,
        base_url=step.base_url,
        api_key_env=step.api_key_env,
        timeout_s=timeout_s,
        options={**step.provider_options, "api": step.api or "chat", "strict": step.strict},
    )


@dataclass
class StepClients:
    """Every step's runtime, and the batch clients built ahead (each taken once by a lane)."""

    runtimes: dict[str, StepRuntime] = field(default_factory=dict)
    batch: dict[str, BatchProvider] = field(default_factory=dict)
    realtime: list[tuple[ProviderConfig, Provider]] = field(default_factory=list)  # shared by configuration
    fees: CacheFeeSink | None = None  # where adapters that hold caches report them (engine/cache_fees.py)

    def attach(self, provider: Provider) -> Provider:
        """`provider`, reporting the caches it holds to `fees` where it holds any."""
        if self.fees is not None and isinstance(provider, HoldsCaches):
            provider.report_cache_fees(self.fees)
        return provider

    def take_batch(self, step: str) -> BatchProvider | None:
        return self.batch.pop(step, None)

    def add(self, step: StepPlan, limits: RunLimits) -> StepRuntime:
        """The step's runtime, with its fallback and escalation models' (a missing key fails here)."""
        runtime = _runtime(step, limits, self.realtime, self)
        runtime.fallbacks = [_runtime(other, limits, self.realtime, self, own=False) for other in step.fallbacks]
        if step.escalation is not None:
            runtime.escalation = _runtime(step.escalation, limits, self.realtime, self, own=False)
        self.runtimes[step.name] = runtime
        return runtime

    async def aclose(self) -> None:
        providers = [r.provider for r in self.runtimes.values()] + [p for _, p in self.realtime]
        for provider in {id(p): p for p in providers}.values():  # shared: once
            await provider.aclose()
        for unused in self.batch.values():  # steps that had nothing to send after all
            await unused.aclose()
        self.batch.clear()


def build_clients(
    plan: CompiledPlan, limits: RunLimits, refresh: frozenset[str], fees: CacheFeeSink | None = None
) -> StepClients:
    """Clients for the steps with work (a missing key or a bad provider setting fails here)."""
    clients = StepClients(fees=fees)
    for step in plan.header.steps:
        if step.local:
            continue
        if step.counts.to_run == 0 and not step.counts.estimated and not refresh:
            continue
        if step.kind == "resolve":  # its requests: pairs judged, and maybe one per cluster
            clients.add(judge_plan(step), limits)
            if step.resolve is not None and step.resolve.canonical_prompt is not None:
                clients.add(canonical_plan(step), limits)
            continue
        clients.add(step, limits)
    return clients


def _runtime(
    step: StepPlan,
    limits: RunLimits,
    realtime: list[tuple[ProviderConfig, Provider]],
    clients: StepClients,
    own: bool = True,
) -> StepRuntime:
    """A step's (or a fallback model's) client and price; a batch step's batch client is kept for its lane."""
    config = provider_config(step, limits.request_timeout_s)
    price = ModelPrice.from_dict(step.price) if step.price else None
    if step.mode == "batch" and own:
        clients.batch[step.name] = create_batch_provider(config)
        return StepRuntime(step, DeferredProvider(config), price)
    return StepRuntime(step, clients.attach(_shared(realtime, config)), price)


def _shared(built: list[tuple[ProviderConfig, Provider]], config: ProviderConfig) -> Provider:
    """The client of an earlier step with the same configuration (provider, endpoint, key variable,
    timeout, options), else a new one: adapters keep no per-step state, and one client is one SDK
    set-up (a CA-bundle load each) and one pool of connections instead of one per step."""
    for seen, provider in built:
        if seen == config:
            return provider
    provider = create_provider(config)
    built.append((config, provider))
    return provider
