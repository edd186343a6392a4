"""What every call to a model provider shares (DESIGN section 5): the endpoint guard for custom
base URLs, and one HTTP client with timeouts and retries.

``check_endpoint`` keeps custom endpoints off private networks (server-side request forgery).
``ProviderClient`` POSTs JSON with timeouts, retries 429 / 5xx / connection errors with
exponential backoff and full jitter, honours ``Retry-After`` (RFC 9110 section 10.2.3), and turns
failures into domain errors. The embeddings port uses it now; the language-model client reuses it.

Nothing here logs a request body, a header or a key. The core never reads the environment: the
caller says whether private endpoints are allowed (the local stack's
``KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1``).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import math
import random
import socket
import threading
import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import httpx

from agent_memory.addresses import not_public
from agent_memory.clock import Clock, SystemClock
from agent_memory.errors import EndpointRefused, ProviderRejected, ProviderUnavailable

logger = logging.getLogger("agent_memory.providers")



# --------------------------------------------------------------------------------------------
# Endpoint guard
# --------------------------------------------------------------------------------------------


def check_endpoint(url: str, *, allow_private: bool) -> None:
    """Refuse a custom provider endpoint that is not ``https://`` or not public.

    The host is resolved with ``socket.getaddrinfo`` and every answer must be a global address
    (``ipaddress`` ``is_global``, i.e. outside the IANA special-purpose registries of RFC 6890):
    refused are loopback (127.0.0.0/8, ::1), private (10/8, 172.16/12, 192.168/16, fc00::/7),
    link-local (169.254/16 with the cloud metadata service 169.254.169.254, fe80::/10), carrier
    NAT (100.64/10), unspecified, multicast, reserved and site-local addresses, Teredo, and IPv6
    forms that embed a non-global IPv4 address (IPv4-mapped ::ffff:a.b.c.d, 6to4 2002::/16,
    NAT64 64:ff9b::/96). One non-public answer among public ones is enough to refuse.

    With ``allow_private`` (local stack only) both rules are lifted: ``http://`` is accepted and
    the host is not resolved here at all (an unknown host then fails when it is called).

    Limit (DNS rebinding): the check runs just before each call, but the HTTP client resolves
    the name again when it connects, so a name whose answers change between the two (a short TTL
    under an attacker's control) can still slip through. Pinning the checked address for the
    connection would close this; it is not done.

    Raises ``EndpointRefused`` (a ``ValidationFailed``) naming the host and why; never the full
    URL (it may carry a query string) nor a key. Raises ``ProviderUnavailable`` when the name
    does not resolve.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError:
        raise EndpointRefused("The custom endpoint is not a valid URL.") from None
    schemes = ("https", "http") if allow_private else ("https",)
    if parts.scheme not in schemes or not host:
        wanted = "an http:// or https://" if allow_private else "an https://"
        raise EndpointRefused(
            f"The custom endpoint for host '{host}' must use https://."
            if host and parts.scheme == "http"
            else f"The custom endpoint must be {wanted} URL with a host name."
        )
    if parts.username is not None or parts.password is not None:
        raise EndpointRefused(
            f"The custom endpoint for host '{host}' must not hold credentials in the URL."
        )
    if allow_private:
        return
    try:
        answers = socket.getaddrinfo(
            host, port or 443, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )
    except UnicodeError:
        raise EndpointRefused(f"The custom endpoint host '{host}' is not a valid name.") from None
    except OSError as exc:
        raise ProviderUnavailable(
            f"The custom endpoint host '{host}' cannot be resolved "
            f"({exc.strerror or type(exc).__name__}); check the name or try again later."
        ) from None
    if not answers:
        raise ProviderUnavailable(f"The custom endpoint host '{host}' resolves to no address.")
    for _family, _type, _proto, _canonname, sockaddr in answers:
        text = str(sockaddr[0]).split("%", 1)[0]  # drop an IPv6 zone id ("fe80::1%eth0")
        try:
            address = ipaddress.ip_address(text)
        except ValueError:
            raise EndpointRefused(
                f"The custom endpoint host '{host}' resolves to '{text}', not an IP address."
            ) from None
        reason = not_public(address)
        if reason:
            raise EndpointRefused(
                f"The custom endpoint host '{host}' resolves to {address}, which is {reason}; "
                "custom endpoints must resolve only to public addresses."
            )


# --------------------------------------------------------------------------------------------
# HTTP client
# --------------------------------------------------------------------------------------------

_http: httpx.Client | None = None
_http_lock = threading.Lock()


def _shared_http() -> httpx.Client:
    """The process's one ``httpx.Client`` (connection pool), made on first use, not at import.

    Redirects are not followed: a redirect could lead to an address the guard never saw.
    """
    global _http
    if _http is None:
        with _http_lock:
            if _http is None:
                _http = httpx.Client(follow_redirects=False)
    return _http


# Worth another try: the connection failed or broke (a pooled keep-alive connection closed
# while the Lambda environment was frozen shows up as ReadError or RemoteProtocolError).
_RETRYABLE_TRANSPORT: tuple[type[httpx.HTTPError], ...] = (
    httpx.ConnectTimeout,
    httpx.NetworkError,
    httpx.RemoteProtocolError,
)
_SENSITIVE_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "proxy-authorization"})
_MESSAGE_LIMIT = 300


class ProviderClient:
    """POST JSON to a model provider with timeouts and retries; raise domain errors.

    Timeouts (seconds): ``connect_timeout`` (default 3) to open the connection,
    ``read_timeout`` (default 30) between bytes of the answer (also used for writing).

    Retries (at most ``max_retries``, default 3, so at most 4 attempts): HTTP 429, HTTP 5xx,
    and connection errors (refused, reset, connect timeout). The wait before retry ``n``
    (0-based) is "full jitter" exponential backoff, uniform in
    ``[0, min(backoff_cap, backoff_base * 2**n)]`` (defaults 0.5 s and 8 s; AWS Architecture
    Blog, "Exponential Backoff and Jitter", 2015), but never shorter than the answer's
    ``Retry-After`` (delay-seconds or HTTP-date, RFC 9110 section 10.2.3). When ``Retry-After``
    asks for more than ``max_retry_after`` seconds (default 20) the call gives up at once.
    A read timeout is not retried: the provider may still be working, and another full wait
    would outlast the caller's own deadline. Other 4xx answers are not retried.

    ``sleep``, ``clock`` (for HTTP-date ``Retry-After``) and ``rand`` (uniform in [0, 1)) are
    injectable so tests need not wait. ``http`` defaults to the process's shared client.

    Logs one warning per retry (host, HTTP status or error class, attempt, wait) on the logger
    ``agent_memory.providers``; never a body, a header or a key.
    """

    def __init__(
        self,
        *,
        connect_timeout: float = 3.0,
        read_timeout: float = 30.0,
        max_retries: int = 3,
        backoff_base: float = 0.5,
        backoff_cap: float = 8.0,
        max_retry_after: float = 20.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Clock | None = None,
        rand: Callable[[], float] = random.random,
        http: httpx.Client | None = None,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.timeout = httpx.Timeout(
            connect=connect_timeout, read=read_timeout, write=read_timeout, pool=connect_timeout
        )
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.max_retry_after = max_retry_after
        self._sleep = sleep
        self._clock: Clock = clock or SystemClock()
        self._rand = rand
        self._http = http

    def post_json(
        self, url: str, payload: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> object:
        """POST ``payload`` as JSON to ``url`` and return the decoded JSON answer (any JSON value;
        the caller checks its shape).

        Raises ``ProviderUnavailable`` when retries run out, on a read timeout, when
        ``Retry-After`` asks for too long, or on another transport failure; ``ProviderRejected``
        on a 4xx other than 429 (with the provider's own message when the body has OpenAI's
        ``{"error": {"message": ...}}`` shape, at most 300 characters, any key in it masked), on
        a 429 whose OpenAI error code is ``insufficient_quota`` (waiting will not help), on a
        redirect, or on a 2xx body that is not JSON.
        """
        host = urlsplit(url).hostname or "?"
        secrets = _secret_values(headers or {})
        http = self._http or _shared_http()
        retry = 0
        while True:
            try:
                response = http.post(
                    url, json=dict(payload), headers=dict(headers or {}), timeout=self.timeout
                )
            except _RETRYABLE_TRANSPORT as exc:
                problem = type(exc).__name__
                if retry >= self.max_retries:
                    raise ProviderUnavailable(
                        f"The provider at {host} could not be reached after {retry + 1} "
                        f"attempts ({problem}); try again later."
                    ) from None
                retry = self._pause(host, problem, retry, None)
                continue
            except httpx.TimeoutException as exc:
                raise ProviderUnavailable(
                    f"The provider at {host} did not answer in time ({type(exc).__name__}); "
                    "try again later."
                ) from None
            except httpx.InvalidURL:
                raise EndpointRefused(f"The provider URL for host '{host}' is not valid.") from None
            except httpx.HTTPError as exc:
                raise ProviderUnavailable(
                    f"The call to the provider at {host} failed ({type(exc).__name__})."
                ) from None

            status = response.status_code
            if 200 <= status < 300:
                try:
                    return response.json()
                except (ValueError, RecursionError):  # RecursionError: absurdly deep nesting
                    raise ProviderRejected(
                        f"The provider at {host} answered HTTP {status} with a body that is "
                        "not JSON.",
                        status=status,
                    ) from None
            message = _provider_message(response, secrets)
            said = f": {message}" if message else "."
            if status == 429 and _provider_error_code(response) == "insufficient_quota":
                raise ProviderRejected(
                    f"The provider at {host} answered HTTP 429 (quota exhausted){said}",
                    status=status,
                )
            if status == 429 or status >= 500:
                wait_at_least = retry_after_seconds(
                    response.headers.get("retry-after"), self._clock
                )
                if wait_at_least is not None and wait_at_least > self.max_retry_after:
                    raise ProviderUnavailable(
                        f"The provider at {host} answered HTTP {status} and asked to wait "
                        f"{wait_at_least:.0f} s; try again later{said}",
                        retry_after_seconds=math.ceil(wait_at_least),
                    )
                if retry >= self.max_retries:
                    raise ProviderUnavailable(
                        f"The provider at {host} answered HTTP {status} after {retry + 1} "
                        f"attempts; try again later{said}",
                        retry_after_seconds=(
                            math.ceil(wait_at_least) if wait_at_least is not None else None
                        ),
                    )
                retry = self._pause(host, f"HTTP {status}", retry, wait_at_least)
                continue
            if 300 <= status < 400:
                raise ProviderRejected(
                    f"The provider at {host} answered with a redirect (HTTP {status}), which is "
                    "not followed; configure the final URL.",
                    status=status,
                )
            raise ProviderRejected(
                f"The provider at {host} rejected the request with HTTP {status}{said}",
                status=status,
            )

    def backoff(self, retry: int) -> float:
        """Full-jitter wait in seconds before retry ``retry`` (0-based), ignoring Retry-After."""
        ceiling = min(self.backoff_cap, self.backoff_base * (2.0**retry))
        return self._rand() * ceiling

    def _pause(self, host: str, problem: str, retry: int, at_least: float | None) -> int:
        wait = max(self.backoff(retry), at_least or 0.0)
        logger.warning(
            "provider call to %s failed (%s); retry %d of %d in %.2f s",
            host,
            problem,
            retry + 1,
            self.max_retries,
            wait,
        )
        self._sleep(wait)
        return retry + 1


def bearer_headers(api_key: str | None) -> dict[str, str]:
    """Headers of an OpenAI-shaped request: ``Accept: application/json``, and ``Authorization:
    Bearer <key>`` when there is a key (custom endpoints may take none)."""
    headers = {"Accept": "application/json"}
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def endpoint(base_url: str, path: str) -> str:
    """``base_url`` (with or without a trailing ``/``) joined with ``path`` (``"embeddings"``,
    ``"chat/completions"``, ``"messages"``)."""
    return base_url.rstrip("/") + "/" + path


def retry_after_seconds(value: str | None, clock: Clock) -> float | None:
    """Seconds to wait from a ``Retry-After`` header value, or ``None`` when absent or invalid.

    RFC 9110 section 10.2.3: ``Retry-After = HTTP-date / delay-seconds`` where delay-seconds is
    ``1*DIGIT``. An HTTP-date in the past means 0. ``clock`` gives "now" for the HTTP-date form.
    """
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if moment.tzinfo is None:  # "-0000" or an obsolete zone; HTTP-dates are always GMT
        moment = moment.replace(tzinfo=clock.now().tzinfo)
    return max(0.0, (moment - clock.now()).total_seconds())


def _secret_values(headers: Mapping[str, str]) -> list[str]:
    """Values of credential headers (and the token after "Bearer "), to mask in messages."""
    found: list[str] = []
    for name, value in headers.items():
        if name.lower() in _SENSITIVE_HEADERS and value:
            found.append(value)
            scheme, _, token = value.partition(" ")
            if token and scheme.lower() == "bearer":
                found.append(token)
    return sorted(found, key=len, reverse=True)


def _error_object(response: httpx.Response) -> object:
    try:
        body = json.loads(response.content)
    except ValueError:
        return None
    return body.get("error") if isinstance(body, dict) else None


def _provider_message(response: httpx.Response, secrets: list[str]) -> str | None:
    """The provider's own error text: ``error.message`` of OpenAI's error shape, or ``error``
    when it is a plain string. Keys are masked; at most 300 characters."""
    error = _error_object(response)
    if isinstance(error, dict):
        error = error.get("message")
    if not isinstance(error, str) or not error.strip():
        return None
    # Mask before collapsing whitespace (a key may hold spaces or tabs), then mask the
    # collapsed forms too, and every key whatever its length: masking a short one too often is
    # harmless, showing it is not.
    text = error
    for secret in secrets:
        text = text.replace(secret, "[redacted]")
    text = " ".join(text.split())
    for secret in secrets:
        collapsed = " ".join(secret.split())
        if collapsed:
            text = text.replace(collapsed, "[redacted]")
    if len(text) > _MESSAGE_LIMIT:
        text = text[: _MESSAGE_LIMIT - 1] + "…"
    return text


def _provider_error_code(response: httpx.Response) -> str | None:
    error = _error_object(response)
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None
