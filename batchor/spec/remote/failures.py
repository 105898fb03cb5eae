"""What went wrong reading a remote input, in the words of batchor's error tree (one wording for
every store): missing, refused, unreachable, or a client library that is not installed."""

from __future__ import annotations

from urllib.parse import urlsplit

from batchor.errors import CloudPathMissingError, InputError, InputMissingError, InputUnreachableError


def status_error(url: str, status: int, credentials: str = "the credentials the store reads") -> InputError:
    """The error for an HTTP status the store answered with."""
    if status in (404, 410):
        return InputMissingError(f"input: {url} does not exist (HTTP {status})", hint="check input.path")
    if status in (401, 403):
        return InputError(f"input: access to {url} was refused (HTTP {status})", hint=f"check {credentials}")
    return InputUnreachableError(f"input: {url} answered HTTP {status}", hint="try again later")


def unreachable(url: str, reason: object) -> InputUnreachableError:
    return InputUnreachableError(
        f"input: cannot reach {urlsplit(url).netloc or url} for {url}: {reason}",
        hint="check the network (offline, a proxy, a firewall) or download the file and point input.path at it",
    )


def library_missing(scheme: str, package: str, extra: str) -> CloudPathMissingError:
    return CloudPathMissingError(
        f"input.path: {scheme}:// inputs need {package}, which is not installed",
        hint=f'pip install {package} (or "batchor-llm[{extra}]")',
    )
