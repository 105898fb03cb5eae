"""Remote inputs: `https://` and `s3://` objects read as a local copy pinned to their version.

`input.path` may name an object on a web server or in an S3-compatible store. It is downloaded
once per version into `.batchor/inputs/` beside the spec, and the version it had (the ETag, plus
S3's version id or the Last-Modified date when there is one) is recorded in the plan: applying a
saved plan asks for the version again and refuses it (`stale_plan`) when the object changed.
Credentials come from the usual places (AWS's chain for S3), never from the spec, and never reach
plans, state or logs; a URL carrying a user name, password or signature is refused.
`gs://` and `hf://` are refused with `cloud_unsupported`, naming what they need.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import parse_qsl, urlsplit

from batchor.errors import (
    CloudPathMissingError,
    InputError,
    InputMissingError,
    InputUnreachableError,
    UrlCredentialsError,
)

SCHEMES = ("https://", "http://", "s3://", "gs://", "hf://")
_SECRET_WORDS = ("key", "token", "secret", "sig", "pass", "auth", "credential")
_MISSING = {
    "gs": "Cloud Storage inputs (gs://) are not supported yet: they need google-cloud-storage, which "
    "batchor does not install; copy the object locally (gcloud storage cp) or serve it over https://",
    "hf": "Hugging Face Hub inputs (hf://datasets/...) are not supported yet: they need huggingface_hub, "
    "which batchor does not install; download the file (huggingface-cli download) and point input.path at it",
}
_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class RemoteObject:
    url: str
    version: str  # ETag (+ S3 version id / Last-Modified): changes when the object does
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
        _download(url, partial)
        partial.replace(local)
    return RemoteObject(url, version, local)


def current_version(url: str) -> str:
    """The object's version as its store reports it now (no download)."""
    _check_url(url)
    if url.startswith("s3://"):
        return _s3_version(url)
    headers = _http(url, "HEAD")
    version = headers.get("etag") or headers.get("last-modified")
    if not version:
        raise InputError(
            f"input: {url} has no ETag or Last-Modified header: batchor cannot tell when it changes",
            hint="serve it from a server that sends an ETag (object stores do), or download it and use the file",
        )
    return version


def changed(pinned: str) -> str | None:
    """None when the object `pinned` (url#version) still has that version; else a reason."""
    url, _, version = pinned.partition("#")
    now = current_version(url)
    return None if now == version else f"the remote input {url} changed since the plan was made ({version} -> {now})"


def _check_url(url: str) -> None:
    scheme = url.partition("://")[0]
    if scheme in _MISSING:
        raise CloudPathMissingError(f"input.path: {_MISSING[scheme]}", hint="use an https:// or s3:// input")
    parts = urlsplit(url)
    secret = [k for k, _ in parse_qsl(parts.query) if any(w in k.lower() for w in _SECRET_WORDS)]
    if parts.username or parts.password or secret:
        raise UrlCredentialsError(
            "input.path: the URL carries credentials (a user name, password or signature), which plans would keep",
            hint="use s3:// with AWS credentials from the environment, or a URL that needs none",
        )


def _http(url: str, method: str) -> dict[str, str]:
    opener = urllib.request.build_opener()
    try:
        with opener.open(urllib.request.Request(url, method=method), timeout=_TIMEOUT_S) as response:
            return {k.lower(): v for k, v in response.headers.items()}
    except urllib.error.HTTPError as exc:
        raise _status_error(url, exc.code) from None
    except (urllib.error.URLError, OSError) as exc:
        raise _unreachable(url, getattr(exc, "reason", exc)) from None


def _download(url: str, target: Path) -> None:
    if url.startswith("s3://"):
        bucket, key = _bucket_key(url)
        _s3_call(url, lambda client: client.download_file(bucket, key, str(target)))
        return
    try:
        with urllib.request.build_opener().open(url, timeout=_TIMEOUT_S) as response, open(target, "wb") as out:
            shutil.copyfileobj(response, out, 1 << 20)
    except urllib.error.HTTPError as exc:
        raise _status_error(url, exc.code) from None
    except (urllib.error.URLError, OSError) as exc:
        raise _unreachable(url, getattr(exc, "reason", exc)) from None


def _bucket_key(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.netloc, parts.path.lstrip("/")


def _s3_version(url: str) -> str:
    bucket, key = _bucket_key(url)
    head = _s3_call(url, lambda client: client.head_object(Bucket=bucket, Key=key))
    return str(head.get("ETag") or "") + (f" version={head['VersionId']}" if head.get("VersionId") else "")


def _s3_call(url: str, call: object) -> dict[str, object]:
    """One boto3 S3 call; region, credentials and endpoint (AWS_ENDPOINT_URL) from AWS's usual
    sources. Errors as batchor's: missing object, refused access, no network, no credentials."""
    try:
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
    except ImportError:
        raise CloudPathMissingError(
            "input.path: s3:// inputs need boto3", hint='pip install boto3 (or "batchor-llm[s3]")'
        ) from None
    client = boto3.client("s3", region_name=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"))
    try:
        result = call(client)  # type: ignore[operator]
    except ClientError as exc:
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        raise _status_error(url, status) from None
    except NoCredentialsError:
        raise InputError(
            f"input: no AWS credentials to read {url}",
            hint="set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run with a role",
        ) from None
    except BotoCoreError as exc:
        raise _unreachable(url, exc) from None
    return result if isinstance(result, dict) else {}


def _status_error(url: str, status: int) -> InputError:
    if status in (404, 410):
        return InputMissingError(f"input: {url} does not exist (HTTP {status})", hint="check input.path")
    if status in (401, 403):
        return InputError(
            f"input: access to {url} was refused (HTTP {status})",
            hint="check the credentials the store reads (for s3://: AWS_PROFILE or AWS_ACCESS_KEY_ID)",
        )
    return InputUnreachableError(f"input: {url} answered HTTP {status}", hint="try again later")


def _unreachable(url: str, reason: object) -> InputUnreachableError:
    return InputUnreachableError(
        f"input: cannot reach {urlsplit(url).netloc or url} for {url}: {reason}",
        hint="check the network (offline, a proxy, a firewall) or download the file and point input.path at it",
    )
