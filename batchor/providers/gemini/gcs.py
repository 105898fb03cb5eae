"""Cloud Storage for Vertex AI batch prediction: the job's input file and its results folder.

google-cloud-storage is synchronous: each call runs on a worker thread so the event loop never
waits on it. The client's own retries are off: the engine's call runner retries (and classifies)
every call, as for the other adapters. Credentials are Application Default Credentials;
STORAGE_EMULATOR_HOST points the client at an emulator (the tests' fake).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

from batchor.errors import AuthenticationError
from batchor.providers.errors_map import classify
from batchor.providers.unreachable import unreachable

TIMEOUT_S = 120.0  # one object of up to about 1 GB


def split_gs(uri: str) -> tuple[str, str]:
    """`gs://bucket/name` as (bucket, name)."""
    parts = urlsplit(uri)
    return parts.netloc, parts.path.lstrip("/")


class Storage:
    """The four object calls a batch job needs, each awaitable (run on a thread)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def put(self, uri: str, data: bytes) -> None:
        bucket, name = split_gs(uri)
        blob = self.client.bucket(bucket).blob(name)
        await asyncio.to_thread(
            blob.upload_from_string, data, content_type="application/jsonl", timeout=TIMEOUT_S, retry=None
        )

    async def get(self, uri: str) -> bytes:
        bucket, name = split_gs(uri)
        blob = self.client.bucket(bucket).blob(name)
        data: bytes = await asyncio.to_thread(blob.download_as_bytes, timeout=TIMEOUT_S, retry=None)
        return data

    async def names(self, prefix: str) -> list[str]:
        """The objects under `prefix` (a `gs://bucket/folder/` URI), as URIs."""
        bucket, name = split_gs(prefix)

        def listed() -> list[str]:
            blobs = self.client.list_blobs(bucket, prefix=name, timeout=TIMEOUT_S, retry=None)
            return [f"gs://{bucket}/{blob.name}" for blob in blobs]

        return await asyncio.to_thread(listed)

    async def delete(self, uri: str) -> None:
        bucket, name = split_gs(uri)
        await asyncio.to_thread(self.client.bucket(bucket).blob(name).delete, timeout=TIMEOUT_S, retry=None)

    def close(self) -> None:
        self.client.close()


def storage(project: str | None) -> Storage:
    from google.cloud import storage as gcs

    return Storage(gcs.Client(project=project))


@asynccontextmanager
async def mapped_errors(url: str) -> AsyncIterator[None]:
    """Cloud Storage's errors as batchor's: its status (a 404, a 403, a 429...), a refused
    sign-in, or a connection that failed or was cut (`url` names the bucket's folder)."""
    import google.auth.exceptions
    import requests
    from google.api_core import exceptions as api
    from google.cloud.storage import exceptions as media

    try:
        yield
    except api.GoogleAPICallError as exc:
        raise classify(int(exc.code or 0) or None, f"Cloud Storage: {exc.message}", None) from None
    except media.InvalidResponse as exc:
        status = int(getattr(exc.response, "status_code", 0) or 0) or None
        raise classify(status, f"Cloud Storage: {exc}", None) from None
    except media.DataCorruption as exc:  # a download whose checksum does not match: cut short
        raise unreachable(exc, url) from None
    except google.auth.exceptions.RefreshError as exc:
        raise AuthenticationError(f"Google credentials failed for Cloud Storage: {exc}") from None
    except (requests.RequestException, google.auth.exceptions.TransportError, ConnectionError, TimeoutError) as exc:
        raise unreachable(exc, url) from None
