"""Shared fixtures: a fake provider server (real HTTP, real SDKs), a temp working folder with
its own state, and small spec/data writers."""

from __future__ import annotations

import csv
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.cli.cli_helpers import inprocess_cli  # noqa: E402
from tests.fakes import FakeServer  # noqa: E402
from tests.pg_server import pg_server, pg_url  # noqa: E402,F401 - PostgreSQL fixtures


@pytest.fixture(scope="session")
def fake_server_session():
    with FakeServer.start({}) as server:
        yield server


@pytest.fixture
def fake(fake_server_session, monkeypatch):
    """The fake provider, counters zeroed and config restored; SDKs pointed at it."""
    fake_server_session.reset(config=True)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-key-123456")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_server_session.openai_base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-secret-123456")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_server_session.anthropic_base_url)
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-test-secret-123456")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake_server_session.gemini_base_url)
    return fake_server_session


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A clean working folder (state goes to its .batchor/)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BATCHOR_STATE", raising=False)
    return tmp_path


def write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


SENTIMENT_SCHEMA = {
    "type": "object",
    "properties": {"sentiment": {"type": "string", "enum": ["positive", "negative", "mixed"]},
                   "score": {"type": "integer", "minimum": 1, "maximum": 5}},
    "required": ["sentiment", "score"], "additionalProperties": False,
}


def make_spec(folder: Path, *, rows: int = 20, provider: str = "openai", model: str = "gpt-4.1-mini",
              schema: dict | None = SENTIMENT_SCHEMA, **changes: Any) -> Path:
    """Write a small job (CSV + spec) into `folder`; `changes` update top-level spec keys."""
    write_csv(folder / "data.csv", [{"id": f"r{i}", "text": f"review number {i}"} for i in range(rows)])
    spec: dict[str, Any] = {
        "version": 1, "name": "small",
        "input": {"path": "data.csv", "key": "id"},
        "model": {"provider": provider, "name": model, "params": {"temperature": 0, "max_tokens": 50}},
        "steps": {"classify": {"system": "Classify.", "prompt": "Review: {{ row.text }}",
                               "output": {"schema": schema} if schema else "text"}},
        "output": {"path": "out/results.csv"},
        "limits": {"concurrency": 8, "max_attempts": 3, "request_timeout_s": 10},
    }
    spec.update(changes)
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture
def batchor_cli(monkeypatch, capfd):
    """`batchor_cli(cwd, *args, env={...})`: the real CLI entry point run in this process, returning
    what `run_cli` returns (returncode, stdout, stderr; file-descriptor output included). Use it
    unless the test needs a process of its own (signals, kills, a terminal, start-up imports)."""
    return inprocess_cli(monkeypatch, capfd)


@pytest.fixture
def small_spec(workdir):
    return make_spec(workdir)


def pytest_configure(config):
    os.environ.setdefault("BATCHOR_TEST", "1")
