"""Minimal asyncio HTTP/1.1 server: just the protocol subset the provider SDKs speak.

Why not ``http.server``: it spends a thread per connection and tops out far below the request
rates the engine benchmarks need. This loop keeps connections alive, reads Content-Length and
chunked bodies, answers ``Expect: 100-continue`` and never parses more than it must.
"""

from __future__ import annotations

import asyncio
import json
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl

MAX_HEAD = 1 << 20  # StreamReader limit: the longest header block we accept


class BadRequest(Exception):
    """The peer sent something that is not HTTP/1.1 we understand; the connection is dropped."""


@dataclass(slots=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # names lower-cased; a repeated header keeps its last value
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass(slots=True)
class Response:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    cut: bool = False  # send the head and half the body, then drop the connection


def json_response(status: int, payload: Any, headers: dict[str, str] | None = None) -> Response:
    body = json.dumps(payload, separators=(",", ":")).encode()
    return Response(status, body, headers or {})


# A handler answers a request, or returns None to drop the connection without answering
# (how the server simulates a provider that never replies).
Handler = Callable[[Request], Awaitable[Response | None]]


async def serve(handler: Handler, host: str, port: int) -> asyncio.Server:
    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _connection(reader, writer, handler)

    return await asyncio.start_server(on_connect, host, port, limit=MAX_HEAD, backlog=4096)


async def _connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, handler: Handler) -> None:
    try:
        while True:
            request, keep_alive = await _read_request(reader, writer)
            if request is None:
                break
            try:
                response = await handler(request)
            except Exception as exc:  # noqa: BLE001 -- a bug in the fake must fail loudly, not hang
                traceback.print_exc()
                error = {"message": f"fake server bug: {exc!r}", "type": "fake_server_bug"}
                response = json_response(500, {"error": error})
            if response is None:
                break
            if response.cut:
                whole = _encode(response, keep_alive)
                writer.write(whole[: len(whole) - len(response.body) // 2])
                await writer.drain()
                break
            writer.write(_encode(response, keep_alive))
            await writer.drain()
            if not keep_alive:
                break
    except (BadRequest, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def _read_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> tuple[Request | None, bool]:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise BadRequest("truncated request head") from exc
        return None, False  # clean close between requests
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, version = lines[0].split(" ", 2)
    except ValueError as exc:
        raise BadRequest(f"bad request line {lines[0]!r}") from exc
    headers = _parse_headers(lines[1:])
    if headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    body = await _read_body(reader, headers)
    path, _, query = target.partition("?")
    connection = headers.get("connection", "").lower()
    keep_alive = connection != "close" and (version == "HTTP/1.1" or connection == "keep-alive")
    return Request(method, path, dict(parse_qsl(query)), headers, body), keep_alive


def _parse_headers(lines: list[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in lines:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return headers


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return await _read_chunked(reader)
    length = headers.get("content-length")
    if not length:
        return b""
    try:
        return await reader.readexactly(int(length))
    except ValueError as exc:
        raise BadRequest(f"bad content-length {length!r}") from exc


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            # Skip optional trailers up to the blank line that ends the message.
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)  # CRLF after each chunk


_REASONS: dict[int, str] = {}


def _reason(status: int) -> str:
    reason = _REASONS.get(status)
    if reason is None:
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = "Unknown"
        _REASONS[status] = reason
    return reason


def _encode(response: Response, keep_alive: bool) -> bytes:
    head = [
        f"HTTP/1.1 {response.status} {_reason(response.status)}",
        f"content-type: {response.content_type}",
        f"content-length: {len(response.body)}",
        "connection: keep-alive" if keep_alive else "connection: close",
    ]
    head.extend(f"{name}: {value}" for name, value in response.headers.items())
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + response.body


@dataclass(slots=True)
class Part:
    """One field of a multipart/form-data body (file uploads for the batch APIs)."""

    name: str
    data: bytes
    filename: str | None = None
    content_type: str | None = None


def parse_multipart(body: bytes, content_type: str) -> dict[str, Part]:
    boundary = _header_params(content_type).get("boundary")
    if not boundary:
        raise ValueError("multipart body without a boundary")
    parts: dict[str, Part] = {}
    for chunk in body.split(b"--" + boundary.encode())[1:]:
        if chunk.startswith(b"--"):
            break  # closing delimiter
        head, _, data = chunk.partition(b"\r\n\r\n")
        headers = _parse_headers(head.decode("utf-8").split("\r\n"))
        params = _header_params(headers.get("content-disposition", ""))
        name = params.get("name", "")
        parts[name] = Part(
            name=name,
            data=data[:-2] if data.endswith(b"\r\n") else data,
            filename=params.get("filename"),
            content_type=headers.get("content-type"),
        )
    return parts


def _header_params(value: str) -> dict[str, str]:
    params: dict[str, str] = {}
    for item in value.split(";")[1:]:
        key, _, raw = item.strip().partition("=")
        params[key.lower()] = raw.strip().strip('"')
    return params
