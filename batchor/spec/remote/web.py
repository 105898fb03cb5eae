"""`https://` (and `http://`) inputs: the ETag or Last-Modified from a HEAD, the body from a GET."""

from __future__ import annotations

import shutil
import urllib.error
import urllib.request
from pathlib import Path

from batchor.errors import InputError
from batchor.spec.remote.failures import status_error, unreachable

_TIMEOUT_S = 30.0


def version(url: str) -> str:
    headers = _http(url, "HEAD")
    found = headers.get("etag") or headers.get("last-modified")
    if not found:
        raise InputError(
            f"input: {url} has no ETag or Last-Modified header: batchor cannot tell when it changes",
            hint="serve it from a server that sends an ETag (object stores do), or download it and use the file",
        )
    return found


def download(url: str, version: str, target: Path) -> None:
    try:
        with urllib.request.build_opener().open(url, timeout=_TIMEOUT_S) as response, open(target, "wb") as out:
            shutil.copyfileobj(response, out, 1 << 20)
    except urllib.error.HTTPError as exc:
        raise status_error(url, exc.code) from None
    except (urllib.error.URLError, OSError) as exc:
        raise unreachable(url, getattr(exc, "reason", exc)) from None


def _http(url: str, method: str) -> dict[str, str]:
    opener = urllib.request.build_opener()
    try:
        with opener.open(urllib.request.Request(url, method=method), timeout=_TIMEOUT_S) as response:
            return {k.lower(): v for k, v in response.headers.items()}
    except urllib.error.HTTPError as exc:
        raise status_error(url, exc.code) from None
    except (urllib.error.URLError, OSError) as exc:
        raise unreachable(url, getattr(exc, "reason", exc)) from None
