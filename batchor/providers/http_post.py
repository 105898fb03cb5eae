"""Plain HTTP for the realtime generation call: one aiohttp session posting JSON bodies.

The official SDKs cost 1.7-2.5 ms of CPU per request at zero latency (their request options,
header merging, retries machinery and the httpx-over-aiohttp adapter), against about 0.6 ms for
the same bodies posted with aiohttp itself: enough to cap one process well below 1,500
requests a second. Each adapter builds the same body, sends it here instead of through its SDK
when the transport is `http` (the default), and reads the answer with the same `parse_result`;
the SDK path stays selectable (`transport: sdk`) and is the reference the tests compare against.

Nothing here knows a provider: the caller gives the base URL and the headers, and maps a status
of 400 or more to batchor's errors with its own `error_for`. Transport failures are mapped here
once, with the wording `unreachable` gives every SDK's.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from batchor.providers.base import unreadable_answer
from batchor.providers.unreachable import unreachable

TRANSPORT_HTTP, TRANSPORT_SDK = "http", "sdk"
TRANSPORTS = (TRANSPORT_HTTP, TRANSPORT_SDK)
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # one, not one per `json.dumps`
_MAX_CONNECTIONS = 4096  # the most `limits.concurrency` allows: connections open only when needed


def transport_of(options: dict[str, Any]) -> str:
    """The spec's `transport` option, else BATCHOR_TRANSPORT, else plain HTTP."""
    chosen = options.get("transport") or os.environ.get("BATCHOR_TRANSPORT") or TRANSPORT_HTTP
    return chosen if chosen in TRANSPORTS else TRANSPORT_HTTP


@dataclass(frozen=True, slots=True)
class HttpAnswer:
    """A response as it came: status, headers (case-insensitive) and the body's bytes."""

    status: int
    headers: Any
    content: bytes
    reason: str = ""  # the status line's phrase

    def json(self) -> Any:
        """The body as JSON; a body that is not is an `unreadable_answer` (billed, retried)."""
        try:
            return json.loads(self.content)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise unreadable_answer(exc) from None

    def error_body(self) -> tuple[Any, str]:
        """An error response's body (parsed JSON, else its text) and its text."""
        text = self.content.decode("utf-8", "replace").strip()
        try:
            return json.loads(text), text
        except ValueError:
            return text, text


class JsonPoster:
    """POSTs JSON to `base_url` + path with fixed headers over one pool of kept-alive connections.

    The session is opened by the first post (aiohttp wants a running loop), with a connection
    kept for every request a spec may have in flight. The proxy and the CA bundle come from the
    environment as the SDKs' httpx clients take them (HTTPS_PROXY, NO_PROXY, SSL_CERT_FILE)."""

    def __init__(
        self, base_url: str, headers: dict[str, str], timeout_s: float, secret: str | None = None, *, label: str = ""
    ) -> None:
        self.base_url = base_url.rstrip("/") + "/"
        self.label = label or base_url  # where messages say the request went, as the SDK's would
        self._headers = {"Content-Type": "application/json", "Accept": "application/json", **headers}
        self._timeout_s = timeout_s
        self._secret = secret
        self._session: Any = None
        self._proxy: str | None = None

    def header(self, name: str) -> str | None:
        """A header sent with every request (case as given)."""
        return self._headers.get(name)

    async def post(self, path: str, body: dict[str, Any], params: dict[str, str] | None = None) -> HttpAnswer:
        """Send `body`; any status comes back as an answer, a transport failure as batchor's error."""
        import aiohttp

        url = self.base_url + path.lstrip("/")
        data = _ENCODER.encode(body).encode("utf-8")
        session = self._open()
        try:
            async with session.post(url, data=data, params=params, proxy=self._proxy) as response:
                content = await response.read()
                return HttpAnswer(response.status, response.headers, content, response.reason or "")
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise unreachable(exc, self.label, self._secret) from None

    def _open(self) -> Any:
        if self._session is None:
            import aiohttp

            connector = aiohttp.TCPConnector(limit=_MAX_CONNECTIONS, ssl=_tls_context(self.base_url))
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=self._timeout_s, sock_read=self._timeout_s)
            # Cookies are not used and the proxy is looked up once: aiohttp's `trust_env` would read
            # .netrc and the proxy variables on a worker thread for every request (two thread hops,
            # a fifth of the client's CPU per request).
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=timeout, headers=self._headers, cookie_jar=aiohttp.DummyCookieJar()
            )
            self._proxy = _env_proxy(self.base_url)
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _env_proxy(base_url: str) -> str | None:
    """The proxy the environment names for `base_url` (HTTPS_PROXY, HTTP_PROXY, NO_PROXY), as
    httpx and aiohttp's `trust_env` read them."""
    import urllib.request

    proxies = urllib.request.getproxies()
    scheme, _, rest = base_url.partition("://")
    host = rest.split("/", 1)[0].rsplit("@", 1)[-1].split(":", 1)[0]
    if not proxies.get(scheme) or urllib.request.proxy_bypass(host):
        return None
    return str(proxies[scheme])


def _tls_context(base_url: str) -> Any:
    """certifi's trust store, as the SDKs' httpx uses (SSL_CERT_FILE overrides it); none for http."""
    if not base_url.startswith("https:"):
        return None
    import ssl

    cafile = os.environ.get("SSL_CERT_FILE")
    if not cafile:
        try:
            import certifi

            cafile = certifi.where()
        except ImportError:
            cafile = None
    return ssl.create_default_context(cafile=cafile)
