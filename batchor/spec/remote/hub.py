"""`hf://datasets/org/name@revision/path` inputs through huggingface_hub: the file's content hash
(its ETag) at that revision (a branch, tag or commit; `main` when left out), and the file from the
same revision. HF_TOKEN (or a token saved by `hf auth login`) reads private and gated datasets;
HF_ENDPOINT points the client at a mirror."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from batchor.errors import InputError, InputMissingError
from batchor.spec.remote.failures import library_missing, status_error, unreachable

_TIMEOUT_S = 30.0
_FORM = "hf://datasets/<org>/<name>@<revision>/<path in the dataset>"


def parse(url: str) -> tuple[str, str, str]:
    """(repo id, revision, file path) of an `hf://datasets/...` URL."""
    kind, _, rest = url.removeprefix("hf://").partition("/")
    parts = rest.split("/")
    if kind != "datasets" or len(parts) < 3 or not all(parts):
        raise InputError(f"input.path: {url} is not a Hub dataset file", hint=f"write {_FORM}")
    org, (name, _, revision), path = parts[0], parts[1].partition("@"), "/".join(parts[2:])
    return f"{org}/{name}", unquote(revision) or "main", path


def version(url: str) -> str:
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    repo, revision, path = parse(url)
    endpoint = _endpoint()
    found = _call(
        url,
        lambda: get_hf_file_metadata(
            hf_hub_url(repo, path, repo_type="dataset", revision=revision, endpoint=endpoint),
            timeout=_TIMEOUT_S,
            endpoint=endpoint,
        ),
    )
    if not found.etag:
        raise InputError(f"input: the Hub sent no content hash for {url}", hint="download the file and use it")
    return str(found.etag)


def download(url: str, version: str, target: Path) -> None:
    from huggingface_hub import hf_hub_download

    repo, revision, path = parse(url)
    with tempfile.TemporaryDirectory(dir=target.parent) as folder:
        got = _call(
            url,
            lambda: hf_hub_download(
                repo,
                path,
                repo_type="dataset",
                revision=revision,
                local_dir=folder,
                endpoint=_endpoint(),
                etag_timeout=_TIMEOUT_S,
            ),  # fmt: skip
        )
        shutil.move(str(got), target)


def _endpoint() -> str | None:
    return os.environ.get("HF_ENDPOINT") or None  # read per call: the client reads it once, at import


def _call(url: str, call: Callable[[], Any]) -> Any:
    """One Hub call, its errors as batchor's: a missing dataset, revision or file, a private or
    gated dataset without access, offline mode, no network."""
    try:
        from huggingface_hub import errors
    except ImportError:
        raise library_missing("hf", "huggingface_hub", "hf") from None
    token = "set HF_TOKEN (or run `hf auth login`) with a token that can read it"
    try:
        return call()
    except errors.GatedRepoError:
        raise InputError(
            f"input: {url} is a gated dataset", hint=f"accept its conditions on the Hub, then {token}"
        ) from None
    except errors.RepositoryNotFoundError:
        raise InputMissingError(
            f"input: no dataset for {url}, or it is private", hint=f"check input.path, or {token}"
        ) from None
    except (errors.RevisionNotFoundError, errors.RemoteEntryNotFoundError) as exc:
        raise InputMissingError(
            f"input: {url} does not exist ({type(exc).__name__})", hint="check input.path"
        ) from None
    except errors.HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else 0
        raise status_error(url, status, "HF_TOKEN") from None
    except errors.OfflineModeIsEnabled:
        raise unreachable(url, "HF_HUB_OFFLINE is set") from None
    except Exception as exc:
        if not _network(exc):
            raise
        raise unreachable(url, exc) from None


def _network(exc: Exception) -> bool:
    """A refused connection or a timeout, from the socket or the client's HTTP stack (httpx or
    httpx2, whose errors are not OSErrors)."""
    return isinstance(exc, OSError) or any(c.__name__ == "TransportError" for c in type(exc).__mro__)
