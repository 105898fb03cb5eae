"""`gs://bucket/object` inputs through google-cloud-storage: the object's generation from its
metadata, that generation's bytes from a download. Credentials are Application Default
Credentials (`gcloud auth application-default login`, GOOGLE_APPLICATION_CREDENTIALS, a
workload's service account); STORAGE_EMULATOR_HOST points the client at an emulator."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from batchor.errors import InputError, InputMissingError
from batchor.spec.remote.failures import library_missing, status_error, unreachable

_TIMEOUT_S = 30.0
_CREDENTIALS = "the Google credentials (gcloud auth application-default login, or GOOGLE_APPLICATION_CREDENTIALS)"


def version(url: str) -> str:
    bucket, name = _bucket_name(url)
    blob = _call(url, lambda client: client.bucket(bucket).get_blob(name, timeout=_TIMEOUT_S, retry=None))
    if blob is None:
        raise InputMissingError(f"input: {url} does not exist", hint="check input.path")
    return f"generation={blob.generation}"


def download(url: str, version: str, target: Path) -> None:
    """Exactly the generation `version` names: a newer upload since does not mix in."""
    bucket, name = _bucket_name(url)
    generation = int(version.removeprefix("generation="))

    def read(client: Any) -> None:
        blob = client.bucket(bucket).blob(name, generation=generation)
        blob.download_to_filename(str(target), timeout=_TIMEOUT_S, retry=None)

    _call(url, read)


def _bucket_name(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.netloc, parts.path.lstrip("/")


def _call(url: str, call: Callable[[Any], Any]) -> Any:
    """One Cloud Storage call, its errors as batchor's: missing object, refused access, no
    credentials, no network. The client's own retries are off (offline, they wait two minutes)."""
    try:
        import google.auth.exceptions
        from google.api_core import exceptions as api
        from google.cloud import storage
    except ImportError:
        raise library_missing("gs", "google-cloud-storage", "gcs") from None
    try:
        client = storage.Client(project=None)  # reading an object needs no project
        return call(client)
    except google.auth.exceptions.DefaultCredentialsError:
        raise InputError(f"input: no Google credentials to read {url}", hint=f"set up {_CREDENTIALS}") from None
    except api.GoogleAPICallError as exc:
        raise status_error(url, int(exc.code or 0), _CREDENTIALS) from None
    except (google.auth.exceptions.TransportError, OSError) as exc:
        raise unreachable(url, exc) from None
