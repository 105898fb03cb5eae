"""A provider that cannot be reached: the row's error names the URL and the cause, for each
adapter and its real SDK (no SDK message, no `ssl.SSLContext` repr, no refusal called a timeout)."""

from __future__ import annotations

import csv
import socket
from pathlib import Path

import pytest

from batchor import api
from tests.providers.helpers import provider_spec

PROVIDERS = {"openai": "gpt-4.1-mini", "anthropic": "claude-haiku-4-5", "gemini": "gemini-2.5-flash"}


def closed_port() -> int:
    """A port nothing listens on: bound, then released (connections to it are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def errors(workdir: Path, spec: Path) -> set[str]:
    out = workdir / "out.csv"
    result = api.apply(spec, output=out, state=str(workdir / "state.duckdb"), handle_signals=False,
                       limits={"max_attempts": 1})
    assert result.status == "failed"
    with out.open(newline="", encoding="utf-8") as handle:
        return {row["_error"] for row in csv.DictReader(handle)}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_refused_connection_names_the_url_and_the_cause(workdir, fake, provider):
    url = f"http://127.0.0.1:{closed_port()}/"
    spec = provider_spec(workdir, provider, PROVIDERS[provider], rows=2, base_url=url)
    assert errors(workdir, spec) == {
        f"classify: provider_unavailable: cannot connect to {url} (connection refused)"}
