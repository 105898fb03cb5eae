"""Remote inputs: `https://`, `s3://`, `gs://` and `hf://` objects read as a local copy pinned to
their version.

`input.path` may name an object on a web server, in an S3-compatible store, in Cloud Storage or
in a Hugging Face dataset (`hf://datasets/org/name@revision/path`). It is downloaded once per
version into `.batchor/inputs/` beside the spec, and the version it had (the ETag, plus S3's
version id, Cloud Storage's generation, or the Hub file's content hash) is recorded in the plan:
applying a saved plan asks for the version again and refuses it (`stale_plan`) when the object
changed. Credentials come from the usual places (AWS's chain, Google's Application Default
Credentials, HF_TOKEN), never from the spec, and never reach plans, state or logs; a URL
carrying a user name, password or signature is refused. Each store is a module with
`version(url)` and `download(url, version, target)`; its client library is imported only when used.
"""

from __future__ import annotations

import hashlib
import importlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import ModuleType
from urllib.parse import parse_qsl, urlsplit

from batchor.errors import UrlCredentialsError

SCHEMES = ("https://", "http://", "s3://", "gs://", "hf://")
_STORES = {"https": "web", "http": "web", "s3": "s3", "gs": "gcs", "hf": "hub"}  # modules beside this one
_SECRET_WORDS = ("key", "token", "secret", "sig", "pass", "auth", "credential")


@dataclass(frozen=True)
class RemoteObject:
    url: str
    version: str  # ETag (+ S3 version id / GCS generation / Last-Modified): changes when the object does
    local: Path  # the downloaded copy of this version

    @property
    def pinned(self) -> str:
        return f"{self.url}#{self.version}"


def is_remote(path: str) -> bool:
    return path.startswith(SCHEMES)


def fetch(url: str, base_dir: Path) -> RemoteObject:
    """The object at `url`, downloaded into `base_dir/.batchor/inputs/` unless this version is there."""
    version = current_version(url)
    name = PurePosixPath(urlsplit(url).path).name or "input"
    folder = base_dir / ".batchor" / "inputs" / hashlib.sha256(f"{url}#{version}".encode()).hexdigest()[:24]
    local = folder / name
    if not local.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        partial = folder / f".{name}.part"
        _store(url).download(url, version, partial)
        partial.replace(local)
    return RemoteObject(url, version, local)


def current_version(url: str) -> str:
    """The object's version as its store reports it now (no download)."""
    _check_url(url)
    version: str = _store(url).version(url)
    return version


def changed(pinned: str) -> str | None:
    """None when the object `pinned` (url#version) still has that version; else a reason."""
    url, _, version = pinned.partition("#")
    now = current_version(url)
    return None if now == version else f"the remote input {url} changed since the plan was made ({version} -> {now})"


def _store(url: str) -> ModuleType:
    """The store's module: `version(url) -> str` and `download(url, version, target)`."""
    return importlib.import_module(f"batchor.spec.remote.{_STORES[url.partition('://')[0]]}")


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    secret = [k for k, _ in parse_qsl(parts.query) if any(w in k.lower() for w in _SECRET_WORDS)]
    if parts.username or parts.password or secret:
        raise UrlCredentialsError(
            "input.path: the URL carries credentials (a user name, password or signature), which plans would keep",
            hint="use s3://, gs:// or hf:// with credentials from the environment, or a URL that needs none",
        )
