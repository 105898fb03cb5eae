"""Shared fixtures: a fake provider server (real HTTP, real SDKs), a temp working folder with
its own state, and small spec/data writers."""

from __future__ import annotations

import contextlib
import csv
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.bytecode_cache import compile_project, rewrite_a_share_of_the_test_modules  # noqa: E402
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
    point_sdks_at(fake_server_session, monkeypatch)
    return fake_server_session


def point_sdks_at(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """API keys and base URLs that send each SDK to `server`."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-key-123456")
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-secret-123456")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-test-secret-123456")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.gemini_base_url)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-test-secret-123456")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", server.url)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A clean working folder (state goes to its .batchor/)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BATCHOR_STATE", raising=False)
    return tmp_path


@contextlib.contextmanager
def shared_run_folder(server: FakeServer, folder: Path) -> Iterator[FakeServer]:
    """For a module-scoped fixture that runs a job once for tests that only read what it left:
    inside, the working folder is `folder` and the SDKs go to `server` (config reset around)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.delenv("BATCHOR_STATE", raising=False)
        point_sdks_at(server, patch)
        server.reset(config=True)
        try:
            yield server
        finally:
            server.reset(config=True)


def write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


SENTIMENT_SCHEMA = {
    "type": "object",
    "properties": {
        "sentiment": {"type": "string", "enum": ["positive", "negative", "mixed"]},
        "score": {"type": "integer", "minimum": 1, "maximum": 5},
    },
    "required": ["sentiment", "score"],
    "additionalProperties": False,
}


def make_spec(
    folder: Path,
    *,
    rows: int = 20,
    provider: str = "openai",
    model: str = "gpt-4.1-mini",
    schema: dict | None = SENTIMENT_SCHEMA,
    **changes: Any,
) -> Path:
    """Write a small job (CSV + spec) into `folder`; `changes` update top-level spec keys."""
    write_csv(folder / "data.csv", [{"id": f"r{i}", "text": f"review number {i}"} for i in range(rows)])
    spec: dict[str, Any] = {
        "version": 1,
        "name": "small",
        "input": {"path": "data.csv", "key": "id"},
        "model": {"provider": provider, "name": model, "params": {"temperature": 0, "max_tokens": 50}},
        "steps": {
            "classify": {
                "system": "Classify.",
                "prompt": "Review: {{ row.text }}",
                "output": {"schema": schema} if schema else "text",
            }
        },
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


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session):
    """pytest rewrites the asserts of every test module it imports, in each xdist worker, and keeps
    the result in the module's __pycache__ only when bytecode may be written: with
    PYTHONDONTWRITEBYTECODE set (as on the shared test machine) every run redid it, ~5 CPU-s per
    worker. Collection writes it (gitignored, atomic, checked against the source), so later runs
    read it, and each worker first rewrites its share, so a fresh clone's first run does each
    module once; the variable still holds after collection and for subprocesses."""
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, False
    try:
        rewrite_a_share_of_the_test_modules(session.config, ROOT)
        yield
    finally:
        sys.dont_write_bytecode = saved


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker more than the cores this process may use. Many tests wait on a real
    server, a subprocess or a poll, and with one worker per core the cores idled then: on the
    2-core machine the default tier took 153.6 s with two workers and 128.3 s with three, for the
    same 230 CPU-seconds (2026-12-02, quiet)."""
    return len(os.sched_getaffinity(0)) + 1 if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1) + 1


def pytest_configure(config):
    os.environ.setdefault("BATCHOR_TEST", "1")
    if not os.environ.get("BATCHOR_TESTS_ONE_CA"):  # set: an xdist worker of a run that made it
        _refuse_a_project_above_the_temp_folders(config)
        compile_project(ROOT)  # once, before the workers start
        config._ssl_env = {name: os.environ.pop(name, None) for name in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
        os.environ["SSL_CERT_FILE"] = os.environ["BATCHOR_TESTS_ONE_CA"] = str(_one_ca_file())


def _refuse_a_project_above_the_temp_folders(config) -> None:
    """The tests' specs live in temporary folders without a `.batchor/` or `.git`, so their state
    is found by searching upwards (batchor/state/location.py). A `.batchor/` left above those
    folders (say `/tmp/.batchor`, by a job run from /tmp) would then be every test's state, and
    tests would fail on each other's plans: stop before any test, saying which folder."""
    base = Path(config.option.basetemp or tempfile.gettempdir()).resolve()
    for folder in (base, *base.parents):
        if (folder / ".batchor").is_dir():
            raise pytest.UsageError(
                f"{folder / '.batchor'} is a batchor project folder above the tests' temporary folders "
                f"({base}): every test would use its state. Move or remove it, or pass --basetemp "
                "pointing somewhere without a .batchor/ above it."
            )


def pytest_unconfigure(config):
    if (saved := getattr(config, "_ssl_env", None)) is not None:
        Path(os.environ.pop("BATCHOR_TESTS_ONE_CA")).unlink(missing_ok=True)
        os.environ.pop("SSL_CERT_FILE", None)
        os.environ.update({name: value for name, value in saved.items() if value is not None})


def _one_ca_file() -> Path:
    """A trust store of one CA for the SDKs' TLS contexts. The tests only speak plain HTTP to the
    local fake, but every SDK client still loads a whole CA bundle (~30-45 ms CPU, 2-3 times per
    apply, and again in each `batchor` process); the SDKs honour SSL_CERT_FILE, so a file of one
    certificate makes that nearly free without changing what the tests drive."""
    import certifi

    bundle = Path(certifi.where()).read_text(encoding="ascii")
    first = re.search(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----\n", bundle, re.S)
    assert first, f"no certificate in {certifi.where()}"
    path = Path(tempfile.gettempdir()) / f"batchor-tests-one-ca-{os.getpid()}.pem"
    path.write_text(first.group(0), encoding="ascii")
    return path
