"""Client-side handle on a fake provider server running in a child process.

The server gets its own process (and core) so that benchmarks measure the client alone; this
handle starts it, hands out base URLs for each SDK and talks to ``/_fake/*`` with urllib only,
so it works in any test without extra dependencies.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any, Self

SERVER = Path(__file__).resolve().with_name("server.py")
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy


class FakeServerError(RuntimeError):
    """The fake server did not start, or refused an admin request."""


class FakeServer:
    """A running fake server. Use as a context manager or call ``stop()``.

    Example fixture::

        @pytest.fixture(scope="session")
        def fake_server():
            with FakeServer.start({"latency_ms": 5}) as server:
                yield server
    """

    def __init__(self, process: subprocess.Popen[str], host: str, port: int) -> None:
        self.process = process
        self.port = port
        self.url = f"http://{host}:{port}"
        self.openai_base_url = f"{self.url}/v1"
        self.anthropic_base_url = self.url
        self.gemini_base_url = self.url

    @classmethod
    def start(
        cls,
        config: dict[str, Any] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        ready_timeout_s: float = 15.0,
    ) -> FakeServer:
        command = [
            sys.executable, str(SERVER), "--host", host, "--port", str(port),
            "--config", json.dumps(config or {}), "--exit-with-parent",
        ]  # fmt: skip
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], ready_timeout_s)
        line = process.stdout.readline() if ready else ""
        if not line.startswith("LISTENING "):
            process.kill()
            process.wait()
            raise FakeServerError(f"fake server did not start (exit code {process.returncode}, said {line!r})")
        return cls(process, host, int(line.split()[1]))

    def stats(self) -> dict[str, Any]:
        return self._call("GET", "/_fake/stats")

    def config(self) -> dict[str, Any]:
        return self._call("GET", "/_fake/config")

    def configure(self, **changes: Any) -> dict[str, Any]:
        """Merge ``changes`` into the running config (``None`` restores a key's default)."""
        return self._call("POST", "/_fake/config", changes)

    def reset(self, config: bool = False, batches: bool = False) -> None:
        """Zero the counters and refill rate buckets; ``config=True`` also restores the
        config the server started with; ``batches=True`` forgets every batch job and file."""
        self._call("POST", "/_fake/reset", {"config": config, "batches": batches})

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _call(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        data = json.dumps(payload).encode() if payload is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("content-type", "application/json")
        try:
            with _OPENER.open(request, timeout=10) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise FakeServerError(f"{method} {path}: {exc.code} {exc.read().decode()}") from exc


def start_fake_server(**config: Any) -> FakeServer:
    return FakeServer.start(config)
