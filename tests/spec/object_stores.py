"""Local fakes of Cloud Storage's JSON API and the Hugging Face Hub's file URLs, for remote-input
tests: just the calls google-cloud-storage and huggingface_hub make to read one object.

Cloud Storage (the client pointed at it by STORAGE_EMULATOR_HOST): object metadata at
``GET /storage/v1/b/<bucket>/o/<name>`` and bytes at ``GET /download/storage/v1/b/<bucket>/o/<name>
?alt=media[&generation=N]``; every put is a new generation, older ones stay readable. The Hub
(HF_ENDPOINT): ``HEAD``/``GET /datasets/<org>/<name>/resolve/<revision>/<path>`` with
``X-Repo-Commit`` and the content hash as ``ETag``; a dataset marked private answers 401 without
a bearer token. ``gets`` counts downloads per object, ``tokens`` the bearer tokens received.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit


class Stores:
    def __init__(self) -> None:
        self.gcs: dict[tuple[str, str], list[bytes]] = {}  # (bucket, name) -> bytes per generation (1, 2, ...)
        self.hub: dict[tuple[str, str], bytes] = {}  # (repo, path) -> bytes on main
        self.commits = 0
        self.private: set[str] = set()
        self.gets: Counter[str] = Counter()
        self.tokens: list[str] = []

    def put_gcs(self, bucket: str, name: str, data: bytes) -> int:
        self.gcs.setdefault((bucket, name), []).append(data)
        return len(self.gcs[(bucket, name)])

    def put_hub(self, repo: str, path: str, data: bytes) -> None:
        self.hub[(repo, path)] = data
        self.commits += 1


def _handler(stores: Stores) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._route(body=True)

        def do_HEAD(self) -> None:
            self._route(body=False)

        def _route(self, body: bool) -> None:
            parts = urlsplit(self.path)
            path, query = unquote(parts.path), parse_qs(parts.query)
            bearer = self.headers.get("authorization", "").removeprefix("Bearer ").strip()
            if bearer:
                stores.tokens.append(bearer)
            if path.startswith(("/storage/v1/b/", "/download/storage/v1/b/")):
                self._gcs(path.split("/storage/v1/b/", 1)[1], query, media=path.startswith("/download/"))
            elif path.startswith("/datasets/") and "/resolve/" in path:
                self._hub(path.removeprefix("/datasets/"), body, bool(bearer))
            else:
                self._send(404, b'{"error": "no such route"}')

        def _gcs(self, rest: str, query: dict[str, list[str]], media: bool) -> None:
            bucket, _, name = rest.partition("/o/")
            versions = stores.gcs.get((bucket, name))
            wanted = int(query["generation"][0]) if "generation" in query else len(versions or [])
            if not versions or not 1 <= wanted <= len(versions):
                self._send(404, json.dumps({"error": {"code": 404, "message": "No such object"}}).encode())
                return
            data = versions[wanted - 1]
            if media or query.get("alt") == ["media"]:
                stores.gets[f"gs://{bucket}/{name}"] += 1
                self._send(200, data, "application/octet-stream")
                return
            meta = {"kind": "storage#object", "bucket": bucket, "name": name, "generation": str(wanted),
                    "metageneration": "1", "size": str(len(data)), "etag": f"e{wanted}"}  # fmt: skip
            self._send(200, json.dumps(meta).encode())

        def _hub(self, rest: str, body: bool, authorised: bool) -> None:
            repo_part, _, file_part = rest.partition("/resolve/")
            _revision, _, path = file_part.partition("/")
            data = stores.hub.get((repo_part, path))
            if repo_part in stores.private and not authorised:
                self._send(401, b'{"error": "Repository Not Found"}', headers={"X-Error-Code": "RepoNotFound"})
                return
            if data is None:
                self._send(404, b'{"error": "Entry not found"}', headers={"X-Error-Code": "EntryNotFound"})
                return
            headers = {
                "X-Repo-Commit": hashlib.sha1(f"commit{stores.commits}".encode()).hexdigest(),
                "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
            }
            if body:
                stores.gets[f"hf://{repo_part}/{path}"] += 1
            self._send(200, data, "text/csv", headers, body)

        def _send(
            self,
            status: int,
            data: bytes,
            kind: str = "application/json",
            headers: dict | None = None,
            body: bool = True,
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            if body:
                self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client closing its kept-alive connection at the end is no failure


@contextmanager
def object_stores() -> Iterator[tuple[str, Stores]]:
    """A running fake of both stores: (its URL, the stores)."""
    stores = Stores()
    server = _Server(("127.0.0.1", 0), _handler(stores))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", stores
    finally:
        server.shutdown()
        server.server_close()
