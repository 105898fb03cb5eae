"""The clients an apply builds (engine/clients.py): a batch-mode step gets its batch client before
any call and no realtime client unless something uses it; a missing key still fails first."""

from __future__ import annotations

import asyncio

import openai
import pytest

from batchor import api
from batchor.engine.clients import DeferredProvider, build_clients, provider_config
from batchor.engine.limits import RunLimits
from batchor.errors import NoApiKeyError
from batchor.providers.base import LLMRequest
from batchor.providers.openai.batch import OpenAIBatchProvider
from tests.conftest import make_spec
from tests.engine.batch_helpers import batch_spec

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def sdk_clients(monkeypatch):
    """Every openai.AsyncOpenAI built, as the `http_client` it was given (None: the SDK's default).
    The realtime adapter brings its own (aiohttp) transport; the batch adapter takes the default.
    Realtime requests go through the SDK here (`BATCHOR_TRANSPORT=sdk`): plain HTTP builds none."""
    monkeypatch.setenv("BATCHOR_TRANSPORT", "sdk")
    built: list[object] = []
    real_init = openai.AsyncOpenAI.__init__

    def counting_init(self, *args, **kwargs):
        built.append(kwargs.get("http_client"))
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(openai.AsyncOpenAI, "__init__", counting_init)
    return built


def test_a_batch_job_builds_its_batch_client_only(fake, workdir, sdk_clients):
    result = api.apply(str(batch_spec(workdir, rows=6)), progress=False)
    assert (result.status, result.succeeded) == ("succeeded", 6)
    assert sdk_clients == [None]  # the batch client; before: a realtime (aiohttp) client too

    sdk_clients.clear()
    result = api.apply(str(make_spec(workdir / "rt", rows=3)), state=str(workdir / "rt.duckdb"), progress=False)
    assert result.succeeded == 3 and len(sdk_clients) == 1 and sdk_clients[0] is not None  # the probe sees it


def test_batch_steps_get_a_ready_batch_client_and_a_deferred_realtime_one(fake, workdir):
    plan = api.plan(str(batch_spec(workdir, rows=4)), save=False)
    clients = build_clients(plan, RunLimits.merged(plan.header.limits), frozenset())
    runtime = clients.runtimes["classify"]
    assert isinstance(runtime.provider, DeferredProvider) and not runtime.provider.built
    assert runtime.provider.name == "openai"
    ready = clients.take_batch("classify")
    assert isinstance(ready, OpenAIBatchProvider) and clients.take_batch("classify") is None  # taken once
    asyncio.run(ready.aclose())
    asyncio.run(clients.aclose())
    assert not runtime.provider.built


def test_a_deferred_realtime_client_is_built_by_its_first_call(fake, workdir):
    plan = api.plan(str(batch_spec(workdir, rows=1)), save=False)
    step = plan.header.steps[0]
    provider = DeferredProvider(provider_config(step, 10.0))

    async def ask() -> str:
        try:
            completion = await provider.complete(
                LLMRequest("k1", step.model, ({"role": "user", "content": "hi"},), {"max_tokens": 20})
            )
        finally:
            await provider.aclose()
        return completion.text

    assert asyncio.run(ask()) and provider.built


def test_a_missing_key_fails_a_batch_job_before_any_call(fake, workdir, monkeypatch):
    spec = batch_spec(workdir, rows=3)
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(NoApiKeyError, match="OPENAI_API_KEY"):
        api.apply(str(spec), progress=False)
    assert fake.stats()["batches_created"] == 0 and not fake.stats().get("by_endpoint")


def test_realtime_steps_configured_alike_share_one_client(fake, workdir, sdk_clients):
    steps = {
        "classify": {"prompt": "Review: {{ row.text }}"},
        "summarize": {"prompt": "Summarize: {{ row.text }}"},
        "terse": {"prompt": "Three words: {{ row.text }}", "model": {"api": "responses"}},
    }
    result = api.apply(str(make_spec(workdir, rows=3, schema=None, steps=steps)), progress=False)
    assert (result.status, result.succeeded) == ("succeeded", 9)
    assert len(sdk_clients) == 2  # classify and summarize share one; terse (the Responses API) has its own
