"""Fake LLM provider server: OpenAI, Anthropic and Gemini endpoints on one local port.

Run it in its own process so its cost is never measured with the client's::

    python -m tests.fakes.server --port 0 --config '{"latency_ms": 20, "rpm": 600}'

It prints ``LISTENING <port>`` once ready. ``/_fake/*`` endpoints (never rate limited nor
counted) read stats and change the config at run time; ``tests/fakes/handle.py`` wraps them.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run as a file: resolve the relative imports below through the repo root
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parents[1]))
    __package__ = "tests.fakes"

import argparse
import asyncio
import json
import os
import re
from collections.abc import Awaitable, Callable
from typing import Any

from . import (
    anthropic_batch_routes,
    anthropic_routes,
    azure_routes,
    batch_core,
    bedrock_batch_routes,
    bedrock_routes,
    gemini_batch_routes,
    gemini_cache_routes,
    gemini_routes,
    openai_batch_routes,
    openai_routes,
    vertex_batch_routes,
)
from .core import CALLER_KEY, Fake, Provider, Route
from .faults import ENDPOINTS as FAULT_ENDPOINTS
from .faults import with_faults
from .wire import Request, Response, json_response, serve

PROVIDERS: tuple[Provider, ...] = (
    openai_routes.PROVIDER,
    anthropic_routes.PROVIDER,
    gemini_routes.PROVIDER,
)
# batch jobs, files and caches, and routes behind a check of their own: modules with register(app)
BATCH_ROUTES = (
    openai_batch_routes,
    anthropic_batch_routes,
    gemini_batch_routes,
    azure_routes,
    gemini_cache_routes,
    bedrock_routes,
    bedrock_batch_routes,
    vertex_batch_routes,
)
RouteHandler = Callable[[Request, dict[str, str]], Awaitable[Response | None]]


def _caller_key(request: Request) -> str:
    """The API key as each SDK sends it: OpenAI's bearer token, Anthropic's x-api-key, Gemini's
    x-goog-api-key (or `?key=`), Azure's api-key."""
    headers = request.headers
    bearer = headers.get("authorization", "").removeprefix("Bearer ").strip()
    found = headers.get("x-api-key") or headers.get("x-goog-api-key") or headers.get("api-key")
    return found or request.query.get("key") or bearer


class App:
    """Routes requests: exact paths through a dict (the hot path), patterns in order after.

    Further endpoints (batch jobs, file uploads) register with ``add`` and share ``fake``.
    """

    def __init__(self, fake: Fake, providers: tuple[Provider, ...] = PROVIDERS) -> None:
        self.fake = fake
        self.exact: dict[tuple[str, str], RouteHandler] = {}
        self.patterns: list[tuple[str, re.Pattern[str], RouteHandler]] = []
        for provider in providers:
            for route in provider.routes:
                named = route.endpoint if route.endpoint in FAULT_ENDPOINTS else None  # behind a fault plan
                self.add(route.method, route.pattern, self._model_handler(provider, route), named)
        for batch_routes in BATCH_ROUTES:
            batch_routes.register(self)

    def add(self, method: str, pattern: str, handler: RouteHandler, name: str | None = None) -> RouteHandler:
        """Route `pattern`; a `name` puts the route behind that endpoint's fault plan (faults.py)."""
        if name is not None:
            handler = with_faults(self.fake, name, handler)
        if re.escape(pattern) == pattern:
            self.exact[(method, pattern)] = handler
        else:
            self.patterns.append((method, re.compile(pattern), handler))
        return handler

    def _model_handler(self, provider: Provider, route: Route) -> RouteHandler:
        async def handle(request: Request, params: dict[str, str]) -> Response | None:
            try:
                body = request.json()
            except ValueError:
                body = None  # the core answers it with the provider's 400
            return await self.fake.handle(provider, route, body, params)

        return handle

    async def __call__(self, request: Request) -> Response | None:
        if request.path.startswith("/_fake/"):
            return self._admin(request)
        CALLER_KEY.set(_caller_key(request))
        handler = self.exact.get((request.method, request.path))
        params: dict[str, str] = {}
        if handler is None:
            for method, pattern, candidate in self.patterns:
                match = pattern.fullmatch(request.path)
                if match and method == request.method:
                    handler, params = candidate, match.groupdict()
                    break
        if handler is None:
            message = f"no fake route for {request.method} {request.path}"
            return json_response(404, {"error": {"message": message, "type": "not_found"}})
        return await handler(request, params)

    def _admin(self, request: Request) -> Response:
        fake, action = self.fake, (request.method, request.path.rstrip("/"))
        try:
            body = request.json() or {}
        except ValueError:
            return json_response(400, {"error": "body is not JSON"})
        if action == ("GET", "/_fake/stats"):
            files = sorted(batch_core.world(fake).files)
            states = {job.id: job.state for job in batch_core.world(fake).jobs.values()}
            return json_response(200, {**fake.stats.as_dict(), "files": files, "batch_states": states})
        if action == ("POST", "/_fake/reset"):
            fake.reset(config=bool(body.get("config")))
            if body.get("batches"):
                fake.batch_world = batch_core.World()  # type: ignore[attr-defined]
            return json_response(200, {"ok": True, "config": fake.config})
        if action == ("GET", "/_fake/config"):
            return json_response(200, fake.config)
        if action == ("POST", "/_fake/config"):
            try:
                return json_response(200, fake.configure(body))
            except (ValueError, TypeError) as exc:
                return json_response(400, {"error": str(exc)})
        if action == ("GET", "/_fake/health"):
            return json_response(200, {"ok": True})
        return json_response(404, {"error": f"unknown admin endpoint {action}"})


async def run(host: str, port: int, config: dict[str, Any], exit_with_parent: bool) -> None:
    _raise_file_limit()
    app = App(Fake(config))
    server = await serve(app, host, port)
    bound = server.sockets[0].getsockname()[1]
    print(f"LISTENING {bound}", flush=True)
    if exit_with_parent:
        asyncio.get_running_loop().create_task(_watch_parent(os.getppid()))
    async with server:
        await server.serve_forever()


def _raise_file_limit() -> None:
    """Thousands of requests in flight need as many sockets; many systems start at 1024."""
    try:
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):
        pass


async def _watch_parent(parent: int) -> None:
    """Exit when the process that started us is gone, so a killed test run leaves no server."""
    while os.getppid() == parent:
        await asyncio.sleep(1.0)
    os._exit(0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--config", default="{}", help="JSON object; see core.DEFAULTS")
    parser.add_argument("--exit-with-parent", action="store_true")
    args = parser.parse_args(argv)
    try:
        config = json.loads(args.config)
        if not isinstance(config, dict):
            raise TypeError("must be a JSON object")
        Fake(config)  # validate before announcing a port
    except (ValueError, TypeError) as exc:
        parser.error(f"--config: {exc}")
    try:
        asyncio.run(run(args.host, args.port, config, args.exit_with_parent))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
