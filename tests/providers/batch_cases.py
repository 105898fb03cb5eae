"""Shared driver for the provider batch adapter tests: the real SDK against the fake Batch API."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from batchor.providers.base import LLMRequest, ProviderConfig
from batchor.providers.batch import BatchTag, RemoteBatch, RowResult, create_batch_provider

SCHEMA = {
    "type": "object",
    "properties": {"label": {"type": "string"}},
    "required": ["label"],
    "additionalProperties": False,
}


def requests(model: str, n: int, schema: dict | None = SCHEMA) -> list[LLMRequest]:
    return [
        LLMRequest(
            f"{i:032x}",
            model,
            ({"role": "system", "content": "Label it."}, {"role": "user", "content": f"item {i}"}),
            {"max_tokens": 40},
            schema,
            "label",
        )
        for i in range(n)
    ]


def tag(batch_id: str, n: int) -> BatchTag:
    return BatchTag(batch_id, "job1", "step", 0, n, time.time())


def run(provider: str, scenario: Any, **options: Any) -> Any:
    async def go() -> Any:
        client = create_batch_provider(ProviderConfig(provider=provider, timeout_s=5.0, options=options))
        try:
            return await scenario(client)
        finally:
            await client.aclose()

    return asyncio.run(go())


async def until_ended(client: Any, remote: RemoteBatch, polls: int = 10) -> RemoteBatch:
    for _ in range(polls):
        remote = await client.poll(remote.remote_id)
        if remote.ended:
            return remote
    raise AssertionError(f"batch {remote.remote_id} never ended")


async def collect(client: Any, remote: RemoteBatch) -> dict[str, RowResult]:
    return {row.key: row async for row in client.results(remote)}


async def round_trip(client: Any, model: str, n: int = 4) -> tuple[RemoteBatch, dict[str, RowResult]]:
    reqs = requests(model, n)
    remote = await client.submit(tag(f"batchor-t{time.time_ns()}", n), [client.encode(r) for r in reqs])
    remote = await until_ended(client, remote)
    return remote, await collect(client, remote)
