"""Throughput of the fake server: small chat completions over keep-alive connections.

Not a test: run ``python -m tests.fakes.bench_server [seconds] [connections] [config-json]``. The client uses
raw asyncio sockets so that it costs far less per request than the server it measures.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

from .handle import FakeServer

BODY = json.dumps({"model": "gpt-bench", "messages": [{"role": "user", "content": "Say hi"}]})
REQUEST = (
    "POST /v1/chat/completions HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n"
    f"authorization: Bearer x\r\ncontent-length: {len(BODY)}\r\n\r\n{BODY}"
).encode()


async def _client(port: int, deadline: float, counts: list[int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    done = 0
    while time.perf_counter() < deadline:
        writer.write(REQUEST)
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
        await reader.readexactly(length)
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(head.decode())
        done += 1
    counts.append(done)
    writer.close()


async def _run(port: int, seconds: float, connections: int) -> int:
    counts: list[int] = []
    deadline = time.perf_counter() + seconds
    await asyncio.gather(*(_client(port, deadline, counts) for _ in range(connections)))
    return sum(counts)


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    connections = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    config = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    with FakeServer.start(config) as server:
        started = time.perf_counter()
        total = asyncio.run(_run(server.port, seconds, connections))
        elapsed = time.perf_counter() - started
        stats = server.stats()
        cpu_s = _cpu_seconds(server.process.pid)
    print(
        f"{total} requests in {elapsed:.2f}s over {connections} connections: "
        f"{total / elapsed:,.0f} req/s; server used {cpu_s:.2f} CPU s "
        f"({stats['requests'] / cpu_s:,.0f} req per server CPU second)"
    )


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` (Linux), to show whether the server was saturated."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    main()
