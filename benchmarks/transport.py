"""Client CPU per realtime request: plain HTTP against the provider's SDK, alternated rounds.

    python benchmarks/transport.py [requests] [rounds] [--provider openai|anthropic|gemini]

Each round sends `requests` structured requests (64 in flight) through the adapter with
`transport: http`, then `transport: sdk`, against the fake answering at once in its own process,
and prints the client's CPU per request (`time.process_time`: the fake's CPU is not counted, and
a loaded machine changes it far less than wall time). The adapter is built and warmed with a few
requests before each measured round, so start-up is not part of the figure.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from batchor.providers import create_provider  # noqa: E402
from batchor.providers.base import LLMRequest, ProviderConfig  # noqa: E402
from tests.fakes.handle import FakeServer  # noqa: E402

SCHEMA = {
    "type": "object",
    "properties": {
        "sentiment": {"type": "string", "enum": ["positive", "negative", "mixed"]},
        "score": {"type": "integer"},
    },
    "required": ["sentiment", "score"],
    "additionalProperties": False,
}
MODELS = {"openai": "gpt-4.1-mini", "anthropic": "claude-haiku-4-5", "gemini": "gemini-2.5-flash"}
KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY"}


def _request(provider: str, number: int) -> LLMRequest:
    messages = (
        {"role": "system", "content": "Classify the review's sentiment and score it from 1 to 5."},
        {"role": "user", "content": f"Review {number}: the battery lasts two days and the screen is sharp."},
    )
    return LLMRequest(
        f"k{number}", MODELS[provider], messages, {"temperature": 0, "max_tokens": 50}, SCHEMA, "classify"
    )


async def _round(config: ProviderConfig, provider: str, count: int, start: int) -> float:
    adapter = create_provider(config)
    limit = asyncio.Semaphore(64)

    async def one(number: int) -> None:
        async with limit:
            await adapter.complete(_request(provider, number))

    try:
        await asyncio.gather(*(one(start - 1 - n) for n in range(32)))  # warm: connections, caches
        began = time.process_time()
        await asyncio.gather(*(one(start + n) for n in range(count)))
        return (time.process_time() - began) / count
    finally:
        await adapter.aclose()


def _base_url(fake: FakeServer, provider: str) -> str:
    return {"openai": fake.openai_base_url, "anthropic": fake.anthropic_base_url, "gemini": fake.gemini_base_url}[
        provider
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("requests", nargs="?", type=int, default=3000)
    parser.add_argument("rounds", nargs="?", type=int, default=3)
    parser.add_argument("--provider", choices=sorted(MODELS), default="openai")
    args = parser.parse_args()
    os.environ.setdefault(KEYS[args.provider], "bench-key")
    per: dict[str, list[float]] = {"http": [], "sdk": []}
    with FakeServer.start({"latency_ms": 0}) as fake:
        for number in range(args.rounds):
            for transport in per:
                config = ProviderConfig(
                    args.provider, base_url=_base_url(fake, args.provider), options={"transport": transport}
                )
                start = (number * 2 + len(per[transport])) * (args.requests + 100) + 100
                per[transport].append(asyncio.run(_round(config, args.provider, args.requests, start)))
                print(f"round {number + 1} {transport}: {per[transport][-1] * 1000:.3f} ms CPU/request", flush=True)
    http, sdk = statistics.median(per["http"]), statistics.median(per["sdk"])
    print(
        f"{args.provider}, {args.requests} requests x {args.rounds} rounds: median client CPU per request "
        f"http {http * 1000:.3f} ms, sdk {sdk * 1000:.3f} ms (sdk/http {sdk / http:.2f}); "
        f"one core would send about {1 / http:,.0f} requests/s over http, {1 / sdk:,.0f} through the SDK"
    )


if __name__ == "__main__":
    main()
