"""What every call to a model provider shares (DESIGN section 5): one HTTP client with a deadline
per call, a cap on the size of an answer, and retries. The network it runs on (bounded name
resolution, the endpoint guard for custom base URLs, connections that keep the deadline and the
public-address rule) is ``network``.

``ProviderClient`` POSTs JSON within one deadline per call (connect, send, every read, the
retries and their waits), reads at most the bytes a legitimate answer can take, retries 429 /
5xx / connection errors with exponential backoff and full jitter, honours ``Retry-After``
(RFC 9110 section 10.2.3), and turns failures into domain errors. The embeddings and the
language-model ports use it.

Provider text never leaves this module: an error keeps the HTTP status, a message of ours and at
most a provider error code of a strict shape (``invalid_api_key``); no provider message, reason
phrase, header or body reaches an exception message or a log line. Nothing here logs a request
body, a header or a key. The core never reads the environment: the caller says whether private
endpoints are allowed (the local stack's ``KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1``).
"""

from __future__ import annotations

import json
import math
import random
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import httpx

from agent_memory.clock import Clock, SystemClock
from agent_memory.errors import EndpointRefused, ProviderRejected, ProviderUnavailable
from agent_memory.observability import logger, subsegment
from agent_memory.providers.network import (
    LAST_MOMENT,
    CallDeadline,
    CallPolicy,
    check_endpoint,
    current_call,
    shared_http,
)

ERROR_BODY_BYTES = 64 * 1024
"""At most this much of an error answer (4xx, 5xx) is read, for its error code only."""
RETRY_AFTER_MAX_SECONDS = 3600
"""The longest wait a ``ProviderUnavailable`` passes on from a provider's ``Retry-After``
(and so the longest ``Retry-After`` of our 503 ``provider_unavailable``): one hour. A provider
asking for longer is answered with this bound; its own value is never shown."""
_RETRY_AFTER_DIGITS = 15
"""Longer delay-seconds than this many digits (over 31 million years) are read as "too long"
rather than converted (a float of 400 digits is infinite)."""
PROVIDER_CODE = re.compile(r"[a-z]{1,32}(?:_[a-z]{1,32}){1,7}")
"""The shape of a provider error code we repeat: lower-case words joined by ``_``, at least two,
at most 64 characters (OpenAI's ``error.code`` such as ``invalid_api_key`` or
``insufficient_quota``, Anthropic's ``error.type`` such as ``rate_limit_error``). Stricter than
``^[a-z][a-z0-9_]{0,63}$``: no digits and at least one ``_``, which a lower-cased base32 or hex
rendering of a key does not pass."""


# --------------------------------------------------------------------------------------------
# The client
# --------------------------------------------------------------------------------------------

# Worth another try: the connection failed or broke (a pooled keep-alive connection closed
# while the Lambda environment was frozen shows up as ReadError or RemoteProtocolError).
_RETRYABLE_TRANSPORT: tuple[type[httpx.HTTPError], ...] = (
    httpx.ConnectTimeout,
    httpx.NetworkError,
    httpx.RemoteProtocolError,
)
_SENSITIVE_HEADERS = frozenset(
    {"authorization", "x-api-key", "api-key", "proxy-authorization", "x-amz-security-token"}
)


@dataclass(frozen=True)
class _Answer:
    status: int
    headers: httpx.Headers
    body: bytes


Signer = Callable[[str, bytes], Mapping[str, str]]
"""Headers that authenticate one request: ``(url, body) -> headers``
(``ProviderClient.post_json``)."""


@dataclass
class _Request:
    """One ``post_json`` call: where, what, with which headers and signer."""

    url: str
    payload: Mapping[str, Any]
    headers: Mapping[str, str]
    sign: Signer | None
    _body: bytes | None = None

    def body(self) -> bytes:
        """The payload as sent when signed: compact JSON in UTF-8, encoded once."""
        if self._body is None:
            self._body = json.dumps(
                self.payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False
            ).encode("utf-8")
        return self._body


_AGAIN = object()
"""``ProviderClient._read``'s answer when the call is to be made once more."""


class ProviderClient:
    """POST JSON to a model provider within a deadline, with retries; raise domain errors.
    ``policy``: the call's deadline, timeouts and retries (``CallPolicy``; its defaults by
    default).

    Deadline: ``deadline`` seconds (default 30) for the whole call of ``post_json``: the
    endpoint check of a custom endpoint, name resolution, connecting, TLS, sending, every read
    of the answer, every retry and every wait before one. Each blocking socket operation waits
    at most the time left, so a provider that trickles its answer a byte at a time is cut off
    at the deadline; the call ends at most a few milliseconds after it, plus the time to decode
    an answer already read (at most ``max_bytes``). A retry, or the wait before it, that would
    not leave ``min_attempt`` seconds (default 0.5) before the deadline is not started.

    Timeouts inside it (seconds): ``connect_timeout`` (default 3) for resolving and connecting,
    ``read_timeout`` (default 30) between bytes of the answer (also for sending), each cut to
    the time left.

    Size: ``post_json``'s ``max_bytes`` is the most a 2xx answer may hold: a ``Content-Length``
    above it is refused before reading, and reading stops as soon as more arrives. Answers are
    asked for uncompressed (``Accept-Encoding: identity``) and a compressed 2xx answer is
    refused, so the bytes counted are the bytes decoded. Of an error answer at most
    ``ERROR_BODY_BYTES`` are read.

    Retries (at most ``max_retries``, default 3, so at most 4 attempts): HTTP 429, HTTP 5xx,
    and connection errors (refused, reset, connect timeout). The wait before retry ``n``
    (0-based) is "full jitter" exponential backoff, uniform in
    ``[0, min(backoff_cap, backoff_base * 2**n)]`` (defaults 0.5 s and 8 s; AWS Architecture
    Blog, "Exponential Backoff and Jitter", 2015), but never shorter than the answer's
    ``Retry-After`` (delay-seconds or HTTP-date, RFC 9110 section 10.2.3). When ``Retry-After``
    asks for more than ``max_retry_after`` seconds (default 20), or for more than the deadline
    leaves, the call gives up at once. A read timeout is not retried: the provider may still be
    working. Other 4xx answers are not retried.

    Errors carry no provider text: the HTTP status, a message of ours, and at most the
    provider's error code when it matches ``PROVIDER_CODE`` and shares no run of six letters
    with a key the request sent (``ProviderRejected.provider_code``). A ``Retry-After`` is
    passed on as ``ProviderUnavailable.retry_after_seconds`` rounded up and bounded by
    ``RETRY_AFTER_MAX_SECONDS``; a message shows that bounded number, never the header.

    ``sleep``, ``clock`` (for HTTP-date ``Retry-After``), ``rand`` (uniform in [0, 1)) and
    ``monotonic`` (the deadline's clock) are injectable so tests need not wait.

    Logs one warning per retry (host, HTTP status or error class, attempt, wait) on the logger
    ``agent_memory.providers``; never a body, a header, provider text or a key.
    """

    def __init__(
        self,
        policy: CallPolicy | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Clock | None = None,
        rand: Callable[[], float] = random.random,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        policy = policy or CallPolicy()
        self.policy = policy
        self.deadline = policy.deadline
        self.connect_timeout = policy.connect_timeout
        self.read_timeout = policy.read_timeout
        self.max_retries = policy.max_retries
        self.backoff_base = policy.backoff_base
        self.backoff_cap = policy.backoff_cap
        self.max_retry_after = policy.max_retry_after
        self.min_attempt = policy.min_attempt
        self._sleep = sleep
        self._clock: Clock = clock or SystemClock()
        self._rand = rand
        self._monotonic = monotonic

    def post_json(
        self,
        url: str,
        payload: Mapping[str, Any],
        *,
        max_bytes: int,
        headers: Mapping[str, str] | None = None,
        custom: bool = False,
        allow_private: bool = False,
        sign: Signer | None = None,
    ) -> object:
        """POST ``payload`` as JSON to ``url`` and return the decoded JSON answer (any JSON value;
        the caller checks its shape), all within ``deadline`` seconds.

        ``sign`` (``(url, body) -> headers``) is called before each attempt with the exact bytes
        sent (compact JSON, UTF-8), and the headers it returns are added to that attempt: AWS
        Signature Version 4 (``providers.bedrock``) covers the body and a time, so each retry is
        signed anew. Its ``Authorization`` and ``X-Amz-Security-Token`` are treated as keys.

        ``max_bytes`` is the largest 2xx answer accepted (the caller derives it from what it
        asked for). ``custom`` marks a custom endpoint: ``check_endpoint(url,
        allow_private=allow_private)`` runs first, inside the deadline, and without
        ``allow_private`` every address the connection resolves is checked again and is the one
        connected to.

        Raises ``ProviderUnavailable`` when the deadline passes, when retries run out, on a read
        timeout, when ``Retry-After`` asks for too long, or on another transport failure;
        ``ProviderRejected`` on a 4xx other than 429 (with ``status``, ``provider_code`` and
        ``mentions``: which top-level fields of ``payload`` the error body names), on a 429
        whose error code is ``insufficient_quota`` (waiting will not help), on a redirect, on a
        2xx answer over ``max_bytes``, compressed, or not JSON; ``EndpointRefused`` for a custom
        endpoint that is not allowed.
        """
        with subsegment("provider"):
            return self._post_json(
                url,
                payload,
                max_bytes=max_bytes,
                headers=headers,
                custom=custom,
                allow_private=allow_private,
                sign=sign,
            )

    def _post_json(
        self,
        url: str,
        payload: Mapping[str, Any],
        *,
        max_bytes: int,
        headers: Mapping[str, str] | None = None,
        custom: bool = False,
        allow_private: bool = False,
        sign: Signer | None = None,
    ) -> object:
        """``post_json`` itself, in its trace subsegment ``provider``."""
        host = urlsplit(url).hostname or "?"
        call = CallDeadline(
            self._monotonic() + self.deadline, self._monotonic, custom and not allow_private
        )
        token = current_call.set(call)
        try:
            if custom:
                left = call.left()
                if left < LAST_MOMENT:
                    raise self._late(host)
                check_endpoint(
                    url, allow_private=allow_private, timeout=min(self.connect_timeout, left)
                )
            request = _Request(url, payload, headers or {}, sign)
            return self._post(call, host, request, max_bytes)
        finally:
            current_call.reset(token)

    def _post(self, call: CallDeadline, host: str, request: _Request, max_bytes: int) -> object:
        secrets = _secret_values(request.headers)
        if request.sign is not None:
            secrets += _secret_values(request.sign(request.url, request.body()))
        retry = 0
        while True:
            answer = self._attempt_or_pause(call, host, request, max_bytes, retry)
            if answer is not None:
                read = self._read(call, host, request.payload, answer, secrets, retry)
                if read is not _AGAIN:
                    return read
            retry += 1

    def _attempt_or_pause(
        self, call: CallDeadline, host: str, request: _Request, max_bytes: int, retry: int
    ) -> _Answer | None:
        """One attempt's answer; None when it failed in a way worth another attempt, after the
        pause before it. Raises when the failure is final."""
        try:
            return self._attempt(call, host, request, max_bytes)
        except _RETRYABLE_TRANSPORT as exc:
            if call.left() < LAST_MOMENT:
                raise self._late(host) from None
            problem = type(exc).__name__
            if retry >= self.max_retries:
                raise ProviderUnavailable(
                    f"The provider at {host} could not be reached after {retry + 1} "
                    f"attempts ({problem}); try again later."
                ) from None
            if not self._pause(call, host, problem, retry, None):
                raise self._no_time_to_retry(host, problem, None) from None
            return None
        except httpx.TimeoutException as exc:
            if call.left() < LAST_MOMENT:
                raise self._late(host) from None
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

    def _read(
        self,
        call: CallDeadline,
        host: str,
        payload: Mapping[str, Any],
        answer: _Answer,
        secrets: list[str],
        retry: int,
    ) -> object:
        """The JSON of a 2xx answer; ``_AGAIN`` after the pause before another attempt (a 429
        or 5xx worth retrying); else the error the answer is, raised."""
        status = answer.status
        if 200 <= status < 300:
            try:
                return json.loads(answer.body)
            except (ValueError, RecursionError):  # RecursionError: absurdly deep nesting
                raise ProviderRejected(
                    f"The provider at {host} answered HTTP {status} with a body that is not JSON.",
                    status=status,
                ) from None
        code = _provider_code(answer.body, secrets) or _aws_error_code(answer.headers, secrets)
        said = f" ({code})" if code else ""
        if status == 429 and code == "insufficient_quota":
            raise ProviderRejected(
                f"The provider at {host} answered HTTP 429 (insufficient_quota): the quota "
                "is exhausted.",
                status=status,
                provider_code=code,
            )
        if status == 429 or status >= 500:
            self._pause_for_status(call, host, answer, f"HTTP {status}{said}", retry)
            return _AGAIN
        if 300 <= status < 400:
            raise ProviderRejected(
                f"The provider at {host} answered with a redirect (HTTP {status}), which is "
                "not followed; configure the final URL.",
                status=status,
            )
        raise ProviderRejected(
            f"The provider at {host} rejected the request with HTTP {status}{said}.",
            status=status,
            provider_code=code,
            mentions=frozenset(
                name for name in payload if name.isascii() and name.encode("ascii") in answer.body
            ),
        )

    def _pause_for_status(
        self, call: CallDeadline, host: str, answer: _Answer, problem: str, retry: int
    ) -> None:
        """Pause before another attempt after a 429 or 5xx answer (``problem``), honouring its
        ``Retry-After``; ``ProviderUnavailable`` when it asks too long a wait, when the retries
        are used up, or when the call's deadline leaves no time for one more."""
        wait_at_least = retry_after_seconds(answer.headers.get("retry-after"), self._clock)
        asked = passed_on_wait(wait_at_least)
        too_long = wait_at_least is not None and wait_at_least > self.max_retry_after
        if asked is not None and too_long:
            more = " or more" if asked >= RETRY_AFTER_MAX_SECONDS else ""
            raise ProviderUnavailable(
                f"The provider at {host} answered {problem} and asked to wait "
                f"{asked} s{more}; try again later.",
                retry_after_seconds=asked,
            )
        if retry >= self.max_retries:
            raise ProviderUnavailable(
                f"The provider at {host} answered {problem} after {retry + 1} "
                "attempts; try again later.",
                retry_after_seconds=asked,
            )
        if not self._pause(call, host, problem, retry, wait_at_least):
            raise self._no_time_to_retry(host, problem, asked)

    def _attempt(self, call: CallDeadline, host: str, request: _Request, max_bytes: int) -> _Answer:
        """One request, its answer read within the deadline: a 2xx body of at most
        ``max_bytes`` (else ``ProviderRejected``), at most ``ERROR_BODY_BYTES`` of another."""
        left = call.left()
        if left < LAST_MOMENT:
            raise httpx.ConnectTimeout("the provider call's deadline has passed")
        timeout = httpx.Timeout(
            connect=self.connect_timeout,
            read=self.read_timeout,
            write=self.read_timeout,
            pool=min(self.connect_timeout, left),
        )
        headers = {**request.headers, "Accept-Encoding": "identity"}
        content = json_body = None
        if request.sign is None:
            json_body = dict(request.payload)
        else:
            content = request.body()
            headers |= {"Content-Type": "application/json", **request.sign(request.url, content)}
        with shared_http().stream(
            "POST", request.url, headers=headers, timeout=timeout, json=json_body, content=content
        ) as response:
            status = response.status_code
            success = 200 <= status < 300
            limit = max_bytes if success else ERROR_BODY_BYTES
            if success:
                encoding = response.headers.get("content-encoding", "identity").strip().lower()
                if encoding not in ("", "identity"):
                    raise ProviderRejected(
                        f"The provider at {host} answered HTTP {status} with a compressed body, "
                        "which was not asked for (Accept-Encoding: identity).",
                        status=status,
                    )
            declared = response.headers.get("content-length", "").strip()
            if declared.isascii() and declared.isdigit() and int(declared) > limit:
                if success:
                    raise self._too_large(host, status, max_bytes)
                return _Answer(status, response.headers, b"")
            body = bytearray()
            for chunk in response.iter_raw():
                body += chunk
                if len(body) > limit:
                    if success:
                        raise self._too_large(host, status, max_bytes)
                    del body[limit:]
                    break
            return _Answer(status, response.headers, bytes(body))

    def backoff(self, retry: int) -> float:
        """Full-jitter wait in seconds before retry ``retry`` (0-based), ignoring Retry-After."""
        ceiling = min(self.backoff_cap, self.backoff_base * (2.0**retry))
        return self._rand() * ceiling

    def _pause(
        self, call: CallDeadline, host: str, problem: str, retry: int, at_least: float | None
    ) -> bool:
        """Wait before retry ``retry + 1`` and return True, or return False at once when the
        wait and ``min_attempt`` seconds of another attempt do not fit before the deadline."""
        wait = max(self.backoff(retry), at_least or 0.0)
        if wait + self.min_attempt > call.left():
            return False
        logger.warning(
            "provider call to %s failed (%s); retry %d of %d in %.2f s",
            host,
            problem,
            retry + 1,
            self.max_retries,
            wait,
        )
        self._sleep(wait)
        return True

    def _late(self, host: str) -> ProviderUnavailable:
        return ProviderUnavailable(
            f"The provider at {host} did not answer within the call's deadline of "
            f"{self.deadline:g} s; try again later."
        )

    def _no_time_to_retry(self, host: str, problem: str, asked: int | None) -> ProviderUnavailable:
        return ProviderUnavailable(
            f"The provider at {host} failed ({problem}) and the call's deadline of "
            f"{self.deadline:g} s leaves no time to try again; try again later.",
            retry_after_seconds=asked,
        )

    @staticmethod
    def _too_large(host: str, status: int, max_bytes: int) -> ProviderRejected:
        return ProviderRejected(
            f"The provider at {host} answered HTTP {status} with more than {max_bytes:,} bytes, "
            "more than a legitimate answer to this request can hold; it was not read further.",
            status=status,
        )


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
    Delay-seconds of more than ``_RETRY_AFTER_DIGITS`` digits are ``math.inf`` ("too long"),
    never converted: the result is always a number a comparison and ``passed_on_wait`` take.
    """
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value) if len(value) <= _RETRY_AFTER_DIGITS else math.inf
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if moment.tzinfo is None:  # "-0000" or an obsolete zone; HTTP-dates are always GMT
        moment = moment.replace(tzinfo=clock.now().tzinfo)
    return max(0.0, (moment - clock.now()).total_seconds())


def passed_on_wait(seconds: float | None) -> int | None:
    """A provider's wait (``retry_after_seconds``) as we pass it on: whole seconds rounded up,
    at most ``RETRY_AFTER_MAX_SECONDS``; ``None`` stays ``None``."""
    if seconds is None:
        return None
    return math.ceil(min(seconds, RETRY_AFTER_MAX_SECONDS))


_SIGV4_SECRETS = re.compile(r"(?:Credential=|Signature=)([^/,\s]+)")


def _secret_values(headers: Mapping[str, str]) -> list[str]:
    """Values of credential headers (and the token after "Bearer "; of a SigV4
    ``Authorization``, the access key id and the signature)."""
    found: list[str] = []
    for name, value in headers.items():
        if name.lower() not in _SENSITIVE_HEADERS or not value:
            continue
        scheme, _, token = value.partition(" ")
        if scheme == "AWS4-HMAC-SHA256":
            # SigV4: the access key id and the signature; the rest (the words "Credential",
            # "SignedHeaders", "Signature", header names) is public and would match any code.
            found += _SIGV4_SECRETS.findall(token)
            continue
        found.append(value)
        if token and scheme.lower() == "bearer":
            found.append(token)
    return found


def _provider_code(body: bytes, secrets: list[str]) -> str | None:
    """The provider's error code, if it has one we may repeat: ``error.code`` (OpenAI), else
    ``error.type`` (Anthropic, and OpenAI's ``invalid_request_error``...), when it matches
    ``PROVIDER_CODE`` and shares no run of six letters, in either direction, with a key sent."""
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError):
        return None
    error = decoded.get("error") if isinstance(decoded, dict) else None
    if not isinstance(error, dict):
        return None
    for field in ("code", "type"):
        value = error.get(field)
        if (
            isinstance(value, str)
            and len(value) <= 64
            and PROVIDER_CODE.fullmatch(value)
            and not _shares_letters(value, secrets)
        ):
            return value
    return None


def _aws_error_code(headers: httpx.Headers, secrets: list[str]) -> str | None:
    """An AWS service's error type as a provider code: the ``x-amzn-ErrorType`` header of an AWS
    JSON protocol answer (``ThrottlingException:http://internal.amazon.com/...``; the AWS
    Smithy specification, "awsJson1_1 protocol", error type resolution) up to its ``:``, in
    snake case (``throttling_exception``, ``access_denied_exception``), under the same rules as
    ``_provider_code``."""
    value = headers.get("x-amzn-errortype", "").partition(":")[0].strip()
    if not value.isascii() or not value.isalpha() or len(value) > 64:
        return None
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", value).lower()
    if PROVIDER_CODE.fullmatch(snake) and not _shares_letters(snake, secrets):
        return snake
    return None


def _shares_letters(code: str, secrets: list[str]) -> bool:
    letters = code.replace("_", "")
    for secret in secrets:
        plain = "".join(char for char in secret.lower() if char.isascii() and char.isalpha())
        both = (plain, plain[::-1])
        for start in range(len(letters) - 5):
            if any(letters[start : start + 6] in text for text in both):
                return True
    return False
