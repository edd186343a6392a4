"""The network under every call to a model provider (``providers.client.ProviderClient``): name
resolution with a bound, the endpoint guard for custom base URLs, and the connection machinery
that keeps a call's deadline and the public-address rule on every socket operation.

``check_endpoint`` keeps custom endpoints off private networks (server-side request forgery);
the connection itself (``DeadlineTransport``, the backend of the one shared ``httpx`` client)
applies the same rule to the addresses it connects to, and cuts every blocking socket operation
(resolve, connect, TLS, each send and read) to the time left to the thread's current call
(``current_call``). This is separate from ``client`` because it is what a call runs on, not
what a call does: ``ProviderClient`` sets the deadline, sends, retries and reads the answer;
nothing here knows a status code or a provider.
"""

from __future__ import annotations

import contextvars
import ipaddress
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

from agent_memory.errors import EndpointRefused, ProviderUnavailable
from agent_memory.providers.addresses import IPAddress, not_public

RESOLVE_TIMEOUT = 3.0
"""Seconds ``check_endpoint`` waits for a name's addresses when no deadline is shorter."""
MAX_LOOKUPS = 8
"""Name lookups running at once in the process; a lookup that hangs holds one until the system
resolver gives up, and a call that finds all of them taken waits (within its deadline)."""


# --------------------------------------------------------------------------------------------
# Name resolution with a bound, and the endpoint guard
# --------------------------------------------------------------------------------------------

_lookups = threading.BoundedSemaphore(MAX_LOOKUPS)


def resolve(host: str, port: int, timeout: float) -> list[IPAddress]:
    """The addresses ``host`` resolves to for a TCP connection to ``port``, in the resolver's
    order without repeats, waiting at most ``timeout`` seconds. An IP literal is its own answer.

    ``socket.getaddrinfo`` has no timeout of its own: the system resolver's retries decide (glibc:
    5 s per try, 2 tries, for each of up to 3 name servers, so 30 s and more). The lookup runs
    on a daemon thread and only the wait for it is bounded; a lookup that never ends keeps its
    thread (at most ``MAX_LOOKUPS`` at once) until the resolver gives up. A zone id
    (``fe80::1%eth0``) is dropped from an answer.

    Raises ``TimeoutError`` when ``timeout`` passes first, ``OSError`` (``socket.gaierror``)
    when the name does not resolve, ``UnicodeError`` for a name IDNA cannot encode, and
    ``ValueError`` for an answer that is not an IP address.
    """
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    if not _lookups.acquire(timeout=max(timeout, 0.0)):
        raise TimeoutError(f"no free name lookup within {timeout:.2f} s")
    outcome: list[Any] = []
    done = threading.Event()

    def lookup() -> None:
        try:
            outcome.append(
                socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
            )
        except (OSError, UnicodeError) as exc:
            outcome.append(exc)
        finally:
            _lookups.release()
            done.set()

    threading.Thread(target=lookup, name="provider-dns", daemon=True).start()
    if not done.wait(max(timeout, 0.0)):
        raise TimeoutError(f"the name did not resolve within {timeout:.2f} s")
    if not outcome:
        raise OSError("the name lookup failed")
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    found: list[IPAddress] = []
    for _family, _type, _proto, _canonname, sockaddr in outcome[0]:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


def _refuse_non_public(host: str, addresses: Iterable[IPAddress]) -> None:
    """``EndpointRefused`` naming the first address of ``host`` that ``not_public`` refuses."""
    for address in addresses:
        reason = not_public(address)
        if reason:
            raise EndpointRefused(
                f"The custom endpoint host '{host}' resolves to {address}, which is {reason}; "
                "custom endpoints must resolve only to public addresses."
            )


def request_problem(url: str) -> str | None:
    """Why the HTTP client cannot build a request for ``url``, or None when it can: a host
    label in punycode that does not decode (``xn--ls8h``; httpx decodes every ``xn--`` label
    with the ``idna`` package when it builds the ``Host`` header, raising ``IDNAError``), a
    name IDNA cannot encode, or a URL httpx refuses (``InvalidURL``). The problem is a short
    phrase of ours, never the URL."""
    try:
        httpx.Request("POST", url)
    except UnicodeError:  # idna.IDNAError is a UnicodeError
        return "an invalid internationalized name: IDNA"
    except httpx.InvalidURL:
        return "a URL the HTTP client refuses"
    return None


def check_endpoint(url: str, *, allow_private: bool, timeout: float = RESOLVE_TIMEOUT) -> None:
    """Refuse a custom provider endpoint that is not ``https://`` or not public.

    The host is resolved (``resolve``, waiting at most ``timeout`` seconds) and every answer must
    pass ``providers.addresses.not_public``, the rule a store's base URL is saved with: refused are
    loopback, private, link-local (with the cloud metadata service 169.254.169.254), carrier NAT,
    unspecified, multicast, reserved and site-local addresses, Teredo, and IPv6 forms that embed a
    non-public IPv4 address (IPv4-mapped, IPv4-compatible, 6to4, NAT64). One non-public answer among
    public ones is enough to refuse.

    With ``allow_private`` (local stack only) both rules are lifted: ``http://`` is accepted and
    the host is not resolved here at all (an unknown host then fails when it is called).

    DNS rebinding: the HTTP client resolves the name again when it connects; a call made with
    ``ProviderClient.post_json(..., custom=True, allow_private=False)`` checks those addresses
    too and connects only to them, so a name whose answers change between the two is refused.

    Raises ``EndpointRefused`` (a ``ValidationFailed``) naming the host and why; never the full
    URL (it may carry a query string) nor a key. Raises ``ProviderUnavailable`` when the name
    does not resolve, or not within ``timeout``.
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
    unsendable = request_problem(url)
    if unsendable is not None:
        raise EndpointRefused(
            f"The custom endpoint for host '{host}' is not a URL the HTTP client can send a "
            f"request to ({unsendable}); save the store with another base URL."
        )
    if allow_private:
        return
    try:
        addresses = resolve(host, port or 443, timeout)
    except UnicodeError:
        raise EndpointRefused(f"The custom endpoint host '{host}' is not a valid name.") from None
    except TimeoutError:
        raise ProviderUnavailable(
            f"The custom endpoint host '{host}' did not resolve within {timeout:.1f} s; "
            "try again later."
        ) from None
    except ValueError:
        raise EndpointRefused(
            f"The custom endpoint host '{host}' resolves to something that is not an IP address."
        ) from None
    except OSError as exc:
        raise ProviderUnavailable(
            f"The custom endpoint host '{host}' cannot be resolved "
            f"({exc.strerror or type(exc).__name__}); check the name or try again later."
        ) from None
    if not addresses:
        raise ProviderUnavailable(f"The custom endpoint host '{host}' resolves to no address.")
    _refuse_non_public(host, addresses)


# --------------------------------------------------------------------------------------------
# The deadline of a call, kept by every socket operation
# --------------------------------------------------------------------------------------------

LAST_MOMENT = 0.001
"""Seconds left under which a call's deadline counts as passed (a socket timeout of 0 would
mean non-blocking)."""


@dataclass(frozen=True)
class CallDeadline:
    """The call a thread is making: its deadline (``monotonic()`` seconds) and whether every
    address it connects to must be public."""

    end: float
    monotonic: Callable[[], float]
    public_only: bool

    def left(self) -> float:
        return self.end - self.monotonic()

    def limit(self, timeout: float | None, late: type[Exception]) -> float:
        """``timeout`` cut to the time left; raises ``late`` when none is left."""
        left = self.left()
        if left < LAST_MOMENT:
            raise late("the provider call's deadline has passed")
        return left if timeout is None else min(timeout, left)


current_call: contextvars.ContextVar[CallDeadline | None] = contextvars.ContextVar(
    "agent_memory_provider_call", default=None
)


def _limit(timeout: float | None, late: type[Exception]) -> float | None:
    call = current_call.get()
    return timeout if call is None else call.limit(timeout, late)


class _DeadlineStream(httpcore.NetworkStream):
    """An httpcore stream whose every blocking operation (each ``recv``, each ``send``, the TLS
    handshake) waits at most the time left to the thread's current call."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _limit(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        sock = self._inner.get_extra_info("socket")
        if current_call.get() is None or not isinstance(sock, socket.socket):
            self._inner.write(buffer, _limit(timeout, httpcore.WriteTimeout))
            return
        # httpcore's own loop gives every partial send the whole timeout; here each send gets
        # only what is left, so a server that reads slowly cannot stretch the call.
        view = memoryview(buffer)
        try:
            while view:
                sock.settimeout(_limit(timeout, httpcore.WriteTimeout))
                view = view[sock.send(view) :]
        except TimeoutError:
            raise httpcore.WriteTimeout("timed out sending the request") from None
        except OSError as exc:
            raise httpcore.WriteError(f"sending failed ({type(exc).__name__})") from None

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        # Python's TLS handshake treats the socket timeout as a deadline for the whole handshake.
        inner = self._inner.start_tls(
            ssl_context, server_hostname, _limit(timeout, httpcore.ConnectTimeout)
        )
        return _DeadlineStream(inner)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's socket backend, resolving names within the call's deadline (``resolve``),
    refusing non-public addresses for custom endpoints, and connecting to the addresses it
    checked, one after the other, each attempt within the time left."""

    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        call = current_call.get()
        if call is None:
            stream = self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
            return _DeadlineStream(stream)
        try:
            addresses = resolve(host, port, call.limit(timeout, httpcore.ConnectTimeout))
        except TimeoutError:
            raise httpcore.ConnectTimeout("the name did not resolve in time") from None
        except (OSError, UnicodeError, ValueError) as exc:
            raise httpcore.ConnectError(
                f"the name did not resolve ({type(exc).__name__})"
            ) from None
        if call.public_only:
            _refuse_non_public(host, addresses)
        failure: Exception = httpcore.ConnectError("the name resolves to no address")
        for address in addresses:
            try:
                stream = self._inner.connect_tcp(
                    str(address),
                    port,
                    call.limit(timeout, httpcore.ConnectTimeout),
                    local_address,
                    socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
                continue
            return _DeadlineStream(stream)
        raise failure

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class DeadlineTransport(httpx.HTTPTransport):
    """httpx's transport over a connection pool built on ``_DeadlineBackend`` (httpcore's
    ``network_backend`` extension point). No proxy from the environment, HTTP/1.1 only.
    ``context`` defaults to httpx's (certifi's certificate authorities); tests pass their own."""

    def __init__(self, context: ssl.SSLContext | None = None) -> None:
        context = context or httpx.create_ssl_context()
        super().__init__(verify=context)
        self._pool = httpcore.ConnectionPool(
            ssl_context=context,
            max_connections=100,
            max_keepalive_connections=20,
            keepalive_expiry=5.0,
            network_backend=_DeadlineBackend(),
        )


_http: httpx.Client | None = None
_http_lock = threading.Lock()


def shared_http() -> httpx.Client:
    """The process's one ``httpx.Client`` (connection pool), made on first use, not at import.

    Redirects are not followed: a redirect could lead to an address the guard never saw. No
    ``.netrc`` or proxy is taken from the environment. The ``httpx`` and ``httpcore`` loggers are
    set to WARNING: below that they log the provider's status line (its reason phrase is
    provider text) and, at DEBUG, its response headers.
    """
    global _http
    if _http is None:
        with _http_lock:
            if _http is None:
                for name in ("httpx", "httpcore"):
                    logging.getLogger(name).setLevel(logging.WARNING)
                _http = httpx.Client(
                    transport=DeadlineTransport(), follow_redirects=False, trust_env=False
                )
    return _http


@dataclass(frozen=True)
class CallPolicy:
    """How long a provider call may take and how often it is tried (``ProviderClient`` says
    what each means): seconds of ``deadline``, ``connect_timeout``, ``read_timeout``,
    ``backoff_base``, ``backoff_cap``, ``max_retry_after`` and ``min_attempt``; at most
    ``max_retries`` retries. ``ValueError`` for a deadline that is not positive or a negative
    number of retries."""

    deadline: float = 30.0
    connect_timeout: float = 3.0
    read_timeout: float = 30.0
    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_cap: float = 8.0
    max_retry_after: float = 20.0
    min_attempt: float = 0.5

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.deadline <= 0:
            raise ValueError("deadline must be > 0")
