"""`s3://bucket/key` inputs through boto3: the ETag (and version id) from a HEAD, the object from a
download. Region, credentials and endpoint (AWS_ENDPOINT_URL) come from AWS's usual sources."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from batchor.errors import InputError
from batchor.spec.remote.failures import library_missing, status_error, unreachable

_CREDENTIALS = "the AWS credentials (AWS_PROFILE or AWS_ACCESS_KEY_ID)"


def version(url: str) -> str:
    bucket, key = _bucket_key(url)
    head = _call(url, lambda client: client.head_object(Bucket=bucket, Key=key))
    return str(head.get("ETag") or "") + (f" version={head['VersionId']}" if head.get("VersionId") else "")


def download(url: str, version: str, target: Path) -> None:
    """The version `version` names (its version id, in a versioned bucket), else the current one."""
    bucket, key = _bucket_key(url)
    pinned = {"VersionId": version.partition(" version=")[2]} if " version=" in version else None
    _call(url, lambda client: client.download_file(bucket, key, str(target), ExtraArgs=pinned))


def _bucket_key(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.netloc, parts.path.lstrip("/")


def _call(url: str, call: Callable[[Any], Any]) -> dict[str, Any]:
    """One boto3 S3 call, its errors as batchor's: missing object, refused access, no network,
    no credentials."""
    try:
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
    except ImportError:
        raise library_missing("s3", "boto3", "s3") from None
    client = boto3.client("s3", region_name=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"))
    try:
        result = call(client)
    except ClientError as exc:
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        raise status_error(url, status, _CREDENTIALS) from None
    except NoCredentialsError:
        raise InputError(
            f"input: no AWS credentials to read {url}",
            hint="set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run with a role",
        ) from None
    except BotoCoreError as exc:
        raise unreachable(url, exc) from None
    return result if isinstance(result, dict) else {}
