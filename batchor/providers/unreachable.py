"""One wording for "the provider could not be reached", whichever SDK or HTTP stack failed.

What the SDKs say about transport failures does not help a user: "Connection error.", an aiohttp
message holding an `ssl.SSLContext` object repr, or a refused connection reported as a timeout.
The exception chain underneath holds the facts, so the message is built from them: the URL and
the cause only, as in "cannot connect to http://127.0.0.1:9/ (connection refused)".
"""

from __future__ import annotations

import errno
import os
import re
import socket
import ssl
from collections.abc import Iterator

from batchor.errors import ProviderUnreachableError, TransientProviderError, redact
from batchor.providers.base import answer_cut

_CAUSES = {
    errno.ECONNREFUSED: "connection refused",
    errno.ECONNRESET: "connection reset",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ENETUNREACH: "network unreachable",
    errno.ETIMEDOUT: "connect timed out",
}
_BEFORE_SENDING = {errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH}
_OBJECT_REPR = re.compile(r"<[^<>]* object at 0x[0-9a-fA-F]+>")


def unreachable(exc: BaseException, url: str | None = None, secret: str | None = None) -> TransientProviderError:
    """A transient error naming where the request went (`url`, else the failed request's URL)
    and why it failed, found in the chain of exceptions below `exc`."""
    chain = list(_chain(exc))
    target = url or _request_url(chain) or "the provider"
    if any(_cut_mid_body(e) for e in chain):
        return answer_cut(redact(f"connection to {target} dropped in the middle of the response", [secret or ""]))
    cause, before_sending = _os_cause(chain)
    if cause is not None:
        message = redact(f"cannot connect to {target} ({cause})", [secret or ""])
        return ProviderUnreachableError(message) if before_sending else TransientProviderError(message)
    if any(_is_timeout(e) for e in chain):
        return timed_out(redact(f"no answer from {target} in time (request timed out)", [secret or ""]))
    message = f"connection to {target} failed ({_plain(chain[-1])})"
    return TransientProviderError(redact(message, [secret or ""]))


def timed_out(message: str) -> TransientProviderError:
    """A request that got no answer in time (counted towards an unresponsive endpoint)."""
    error = TransientProviderError(message)
    error.timed_out = True
    return error


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 12:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__ or getattr(current, "os_error", None)


def _os_cause(chain: list[BaseException]) -> tuple[str | None, bool]:
    """The operating system's reason, from the deepest exception that carries one, and whether
    it failed before anything was sent (a reset connection may have carried the request)."""
    for exc in reversed(chain):
        if isinstance(exc, ssl.SSLCertVerificationError):
            return f"TLS certificate not trusted: {exc.verify_message}", True
        if isinstance(exc, ssl.SSLError):
            return f"TLS error: {exc.reason or exc.strerror or type(exc).__name__}", True
        if isinstance(exc, socket.gaierror):
            return "host name not found", True
        if isinstance(exc, OSError) and isinstance(exc.errno, int) and exc.errno > 0:
            cause = _CAUSES.get(exc.errno) or os.strerror(exc.errno).lower()
            return cause, exc.errno in _BEFORE_SENDING
    return None, False


def _cut_mid_body(exc: BaseException) -> bool:
    """The body of a response stopped short: the status line and headers had come (aiohttp's
    ClientPayloadError; httpx/httpcore's RemoteProtocolError "peer closed connection without
    sending complete message body"). A connection dropped before them is not this."""
    name = type(exc).__name__
    return name == "ClientPayloadError" or (name == "RemoteProtocolError" and "complete message body" in str(exc))


def _request_url(chain: list[BaseException]) -> str | None:
    for exc in chain:
        try:  # httpx-style errors raise when no request was attached
            request = getattr(exc, "request", None)
        except RuntimeError:
            continue
        url = getattr(request, "url", None)
        if url is not None:
            return str(url)
    return None


def _is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, TimeoutError) or "timeout" in type(exc).__name__.lower()


def _plain(exc: BaseException) -> str:
    text = _OBJECT_REPR.sub("", str(exc)).strip() or type(exc).__name__
    return text.splitlines()[0][:200]


def transport_errors() -> tuple[type[BaseException], ...]:
    """Transport errors of every HTTP stack the SDKs may run on: httpx or httpx2, and aiohttp.
    An SDK maps them to its own connection error while it sends a request, but not while a
    caller reads a streamed body (a batch's results): those come through as they are."""
    found: list[type[BaseException]] = []
    for module, name in (("httpx2", "TransportError"), ("httpx", "TransportError"), ("aiohttp", "ClientError")):
        try:
            found.append(getattr(__import__(module), name))
        except (ImportError, AttributeError):
            continue
    return tuple(found)
