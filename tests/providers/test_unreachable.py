"""A provider that cannot be reached: the row's error names the URL and the cause, for each
adapter and its real SDK (no SDK message, no `ssl.SSLContext` repr, no refusal called a timeout)."""

from __future__ import annotations

import csv
import socket
import time
from pathlib import Path

import pytest
import yaml

from batchor import api
from batchor.state import open_state
from tests.providers.helpers import provider_spec

PROVIDERS = {"openai": "gpt-4.1-mini", "anthropic": "claude-haiku-4-5", "gemini": "gemini-2.5-flash"}


def closed_port() -> int:
    """A port nothing listens on: bound, then released (connections to it are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def errors(workdir: Path, spec: Path) -> set[str]:
    out = workdir / "out.csv"
    result = api.apply(
        spec, output=out, state=str(workdir / "state.duckdb"), handle_signals=False, limits={"max_attempts": 1}
    )
    assert result.status == "failed"
    with out.open(newline="", encoding="utf-8") as handle:
        return {row["_error"] for row in csv.DictReader(handle)}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_refused_connection_names_the_url_and_the_cause(workdir, fake, provider):
    url = f"http://127.0.0.1:{closed_port()}/"
    spec = provider_spec(workdir, provider, PROVIDERS[provider], rows=2, base_url=url)
    assert errors(workdir, spec) == {f"classify: provider_unreachable: cannot connect to {url} (connection refused)"}


def dead_endpoint_run(workdir: Path, provider: str, mode: str) -> tuple[api.Result, float]:
    url = f"http://127.0.0.1:{closed_port()}/"
    spec = provider_spec(workdir, provider, PROVIDERS[provider], rows=40, base_url=url)
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    data["limits"].update(max_attempts=5, concurrency=2, mode=mode, batch_poll_s=0.05)
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    compiled = api.plan(spec, state=str(workdir / "state.duckdb"))
    started = time.monotonic()
    result = api.apply(compiled, output=workdir / "out.csv", state=str(workdir / "state.duckdb"), handle_signals=False)
    return result, time.monotonic() - started


# Each SDK's refusal is translated by its adapter (test_refused_connection_names_the_url_and_the_cause,
# realtime) and a batch create refused by each SDK stops the run here; the stop itself is the
# engine's, so the other providers' realtime runs are in `slow`.
DEAD = [
    ("openai", "realtime"),
    ("openai", "batch"),
    ("anthropic", "batch"),
    ("gemini", "batch"),
    *(pytest.param(provider, "realtime", marks=pytest.mark.slow) for provider in ("anthropic", "gemini")),
]


@pytest.mark.parametrize(("provider", "mode"), DEAD)
def test_a_dead_endpoint_stops_the_run_within_seconds(workdir, fake, provider, mode):
    """Not every row tried `max_attempts` times: a few refusals in a row stop the run, its rows
    stay pending for the next apply, and the run record says why."""
    result, elapsed = dead_endpoint_run(workdir, provider, mode)
    assert elapsed < 15, elapsed  # the exact check is the attempts count below
    assert result.status == "failed" and result.succeeded == 0
    assert "cannot connect to http://127.0.0.1:" in result.stop_reason
    assert "(connection refused)" in result.stop_reason and " at 0x" not in result.stop_reason
    store = open_state(str(workdir / "state.duckdb"))
    try:
        ((status, reason, finished),) = store.execute("SELECT status, paused_reason, finished_at IS NOT NULL FROM runs")
        (failed,) = store.execute("SELECT count(*) FROM results WHERE status = 'failed'")[0]
        attempts = store.execute("SELECT count(*) FROM attempts")[0][0]
    finally:
        store.close()
    assert (status, finished) == ("failed", True) and "connection refused" in reason
    assert failed <= 2  # at most the rows that failed before the third refusal in a row
    assert attempts <= 5 * 2 + 3  # nowhere near 40 rows x 5 attempts


def test_a_body_cut_short_over_plain_httpx_is_an_answer_cut_in_transit(fake):
    """Without aiohttp the SDKs' httpx stack reports a cut body as a RemoteProtocolError, as it does
    a connection dropped before any response: only the first is a billed answer."""
    import asyncio

    import httpx2

    from batchor.providers.unreachable import unreachable

    async def post() -> BaseException:
        async with httpx2.AsyncClient() as client:
            try:
                await client.post(
                    f"{fake.openai_base_url}/chat/completions",
                    json={"model": "gpt-4.1-mini", "messages": [{"role": "user", "content": "hi"}]},
                )
            except httpx2.TransportError as exc:
                return exc
        raise AssertionError("the answer arrived whole")

    fake.configure(fail_matching={"hi": "cut"})
    cut = unreachable(asyncio.run(post()))
    fake.configure(fail_matching={"hi": "timeout"}, timeout_hold_s=0.05)
    dropped = unreachable(asyncio.run(post()))
    assert cut.completion is not None and cut.completion.lost and not cut.completion.usage_known
    assert "in the middle of the response" in cut.message
    assert dropped.completion is None and "in the middle" not in dropped.message
