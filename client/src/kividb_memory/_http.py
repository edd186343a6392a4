"""What the sync and async clients share: one request per route, the retry rule, reading answers.

Each public method of the clients builds a :class:`Call` (method, path, query, body, the model
of its answer, whether it is safe to send twice) with the functions at the end of this module,
then sends it with its own httpx client. The retry rule and the reading of answers are pure
functions of the call and of what came back, so both clients behave the same.
"""

from __future__ import annotations

import email.utils
import json
import os
import random
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote, unquote, urlsplit

import httpx
import pydantic

from kividb_memory import models as m
from kividb_memory.errors import (
    ApiConnectionError,
    ApiError,
    KiviDBError,
    UnexpectedResponseError,
    error_class,
)

__version__ = "0.1.0"
USER_AGENT = f"kividb-memory-python/{__version__}"

URL_ENV = "KIVIDB_API_URL"
KEY_ENV = "KIVIDB_API_KEY"

DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
"""30 s to read an answer (API Gateway's own limit for a route), 5 s to connect."""
DEFAULT_MAX_RETRIES = 2
DEFAULT_MAX_RETRY_WAIT = 20.0
MAX_IN_FLIGHT = 100
"""The most requests one client has on the wire at once (httpx's default pool size, 100
connections); more wait their turn in the client. httpcore's pool looks through every queued
request each time a connection frees, so 6,000 calls gathered at once cost seconds of CPU in
the pool alone (LangGraph's own `test_large_batches_async` makes 6,000)."""
RETRY_STATUSES = frozenset({429, 503})

T = TypeVar("T", bound=pydantic.BaseModel)


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request: ``path`` is already percent-encoded; ``answer`` is the model of a success
    body (``None`` for 204); ``idempotent`` says whether sending it twice is the same as sending
    it once (see :func:`retry_wait`): reads, PUT and DELETE, and every write that carries an
    ``idempotency_key`` (sent as the ``Idempotency-Key`` header, the same on every retry)."""

    method: str
    path: str
    answer: type[T] | None
    idempotent: bool
    params: Mapping[str, str | int] = field(default_factory=dict)
    body: Mapping[str, Any] | None = None
    idempotency_key: str | None = None


@dataclass(frozen=True)
class Config:
    """A client's settings, resolved once from its arguments and the environment."""

    base_url: str
    api_key: str
    max_retries: int
    max_retry_wait: float

    def __repr__(self) -> str:  # the key (and the URL's credentials) stay out of every repr
        return f"Config(base_url={shown_url(self.base_url)!r}, api_key='***')"


def shown_url(url: str) -> str:
    """``url`` as messages and reprs show it: credentials (``user:password@``) as ``***@``, a
    query string as ``?***``, a fragment as ``#***``; a URL where an unencoded ``/``, ``?`` or
    ``#`` inside its credentials hides where they end shows only its scheme (``https://***``).
    A query may hold a token, and whoever reads an error (a log, an MCP tool result) must not
    see one."""
    parts = urlsplit(url)
    rest = url.split("://", 1)[1] if "://" in url else url
    if "@" in rest[len(parts.netloc) :]:
        # An '@' past the authority: credentials that an unencoded '/', '?' or '#' cut short.
        return f"{parts.scheme or 'url'}://***"
    authority = "***@" + parts.netloc.rsplit("@", 1)[1] if "@" in parts.netloc else parts.netloc
    shown = f"{parts.scheme}://{authority}{parts.path}" if parts.scheme else authority + parts.path
    if parts.query:
        shown += "?***"
    if parts.fragment:
        shown += "#***"
    return shown


def _scrubbed(text: str, url: str) -> str:
    """``text`` (a library's error message about ``url``) without the parts of ``url`` that
    ``shown_url`` hides, written as they are or percent-decoded."""
    parts = urlsplit(url)
    hidden = [
        parts.netloc.rsplit("@", 1)[0] if "@" in parts.netloc else "",
        parts.query,
        parts.fragment,
        url,
    ]
    for secret in sorted({h for s in hidden if s for h in (s, unquote(s))}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def resolve_config(
    base_url: str | None, api_key: str | None, max_retries: int, max_retry_wait: float
) -> Config:
    """Arguments first, then ``KIVIDB_API_URL`` / ``KIVIDB_API_KEY``. Raises ``ValueError`` when
    either is missing, or ``base_url`` is not an http(s) URL; retries must be >= 0."""
    url = base_url if base_url is not None else os.environ.get(URL_ENV, "")
    key = api_key if api_key is not None else os.environ.get(KEY_ENV, "")
    if not url:
        raise ValueError(f"no API URL: pass base_url= or set {URL_ENV}")
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        raise ValueError(f"base_url is not a URL: {shown_url(url)!r}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ValueError(f"base_url must be an http:// or https:// URL, not {shown_url(url)!r}")
    if parsed.query or parsed.fragment or "?" in url or "#" in url:
        raise ValueError(
            "base_url must not have a query string or fragment (the client adds each "
            f"route's path to it, which would land inside them): {shown_url(url)!r}"
        )
    if not key:
        raise ValueError(f"no API key: pass api_key= or set {KEY_ENV}")
    if max_retries < 0 or not max_retry_wait >= 0:
        raise ValueError("max_retries and max_retry_wait must not be negative")
    return Config(url.rstrip("/"), key, max_retries, max_retry_wait)


def headers(config: Config, call: Call[Any] | None = None) -> dict[str, str]:
    """The headers of a request: the API key (set per request, never on a shared client) and
    the call's ``Idempotency-Key`` when it has one."""
    sent = {
        "Authorization": f"Bearer {config.api_key}",
        "User-Agent": USER_AGENT,
        "Accept": "application/json",
    }
    if call is not None and call.idempotency_key is not None:
        sent[IDEMPOTENCY_KEY_HEADER] = call.idempotency_key
    return sent


IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"
_VISIBLE_ASCII = frozenset(chr(c) for c in range(0x21, 0x7F))


def idempotency_key(given: str | None) -> str:
    """``given`` when it is a valid ``Idempotency-Key`` (1 to 255 visible ASCII characters;
    ``ValueError`` otherwise), else a new random one (a UUID 4): every write the client sends
    carries one, so that sending it again (a retry) writes nothing twice."""
    if given is None:
        return str(uuid.uuid4())
    if not 1 <= len(given) <= 255 or not set(given) <= _VISIBLE_ASCII:
        raise ValueError("idempotency_key must be 1 to 255 visible ASCII characters")
    return given


# --- retries ---------------------------------------------------------------------------------


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds from now: delay-seconds or an HTTP-date (RFC 9110 section
    10.2.3); ``None`` when absent or unreadable (negative or past values read as 0).

    delay-seconds is ``1*DIGIT``, ASCII digits only (``str.isdigit`` also takes ``"²"`` and
    other digits ``float`` refuses); more than 15 of them (over 30 million years) read as
    ``inf``, which no ``max_retry_wait`` allows, so the call is not retried and the error says
    so."""
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return float(text) if len(text) <= 15 else float("inf")
    try:
        moment = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        return None
    return max(0.0, moment.timestamp() - (time.time() if now is None else now))


def backoff(attempt: int) -> float:
    """Wait before retry ``attempt`` (1, 2, ...) when the answer gave no ``Retry-After``: 0.5 s
    doubling, at most 8 s, with full jitter (a uniform draw from zero to that)."""
    return random.uniform(0, min(8.0, 0.5 * 2 ** (attempt - 1)))


def retry_wait(
    call: Call[Any],
    attempt: int,
    config: Config,
    *,
    status: int | None = None,
    retry_after: float | None = None,
    failure: httpx.TransportError | None = None,
) -> float | None:
    """Seconds to wait before sending ``call`` again after ``attempt`` attempts, or ``None``
    for no retry. Exactly:

    - at most ``config.max_retries`` retries;
    - a connection that could not be made (``httpx.ConnectError``, ``httpx.ConnectTimeout``:
      nothing was sent) is retried for every call;
    - 429 (throttled by API Gateway before the function ran) is retried for every call;
    - 503, and a failure after the request was sent (a read timeout, a broken connection), are
      retried only for idempotent calls: reads, recall, search, PUT, DELETE, and the writes,
      which carry an ``Idempotency-Key`` (the server answers a write it already did with its
      first answer and does it once);
    - 409 with a ``Retry-After`` (``idempotency_key_in_progress``: the same write is still
      running) is retried for a call with an ``Idempotency-Key``, to get that write's answer;
    - the wait is ``Retry-After`` when the answer has one, else :func:`backoff`; a
      ``Retry-After`` above ``config.max_retry_wait`` means no retry (the error carries it).
    """
    if attempt > config.max_retries:
        return None
    if failure is not None:
        sent = not isinstance(failure, httpx.ConnectError | httpx.ConnectTimeout)
        if sent and not call.idempotent:
            return None
        return backoff(attempt)
    if status == 409:
        if call.idempotency_key is None or retry_after is None:
            return None
    elif status not in RETRY_STATUSES or (status == 503 and not call.idempotent):
        return None
    if retry_after is not None:
        return retry_after if retry_after <= config.max_retry_wait else None
    return backoff(attempt)


def connection_error(call: Call[Any], url: str, exc: httpx.TransportError) -> ApiConnectionError:
    """The client's exception for an httpx transport failure (raised ``from`` it)."""
    connected = not isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
    if isinstance(exc, httpx.TimeoutException):
        what = "timed out" + (" waiting for the answer" if connected else " connecting")
    else:
        what = "failed" if connected else "could not connect"
    shown = shown_url(url)
    return ApiConnectionError(
        f"{call.method} {shown}: {what} ({type(exc).__name__}: {_scrubbed(str(exc), url)})",
        method=call.method,
        url=shown,
        connected=connected,
    )


# --- answers ---------------------------------------------------------------------------------


def read_answer(call: Call[T], response: httpx.Response) -> T | None:
    """The success body as ``call.answer`` (``None`` for a call without one), or the error
    ``response`` raised as the ``ApiError`` subclass of its status."""
    url = shown_url(str(response.request.url))
    if response.status_code >= 400:
        raise api_error(call, response)
    if call.answer is None:
        return None
    try:
        return call.answer.model_validate_json(response.content)
    except pydantic.ValidationError as exc:
        raise UnexpectedResponseError(
            f"{call.method} {url} answered {response.status_code} with a body that is not "
            f"{call.answer.__name__}: {exc.error_count()} problem(s), first: "
            f"{'.'.join(str(p) for p in exc.errors()[0]['loc'])}: {exc.errors()[0]['msg']}",
            status=response.status_code,
            method=call.method,
            url=url,
        ) from exc


def api_error(call: Call[Any], response: httpx.Response) -> KiviDBError:
    """The exception for an error answer: the API's ``{"error", "message", "details"}``, or
    API Gateway's ``{"message"}`` (code ``http_<status>``). Its ``url`` is ``shown_url``'s."""
    url = shown_url(str(response.request.url))
    status = response.status_code
    retry_after = retry_after_seconds(response.headers.get("retry-after"))
    code, message, details = f"http_{status}", response.reason_phrase or "error", []
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        try:
            parsed = m.ErrorBody.model_validate(body)
        except pydantic.ValidationError:
            if isinstance(body.get("message"), str):
                message = body["message"]
        else:
            code, message, details = parsed.error, parsed.message, parsed.details or []
    elif response.content:
        text = response.text[:200]
        message = f"{message}: {text}"
    error: ApiError = error_class(status)(
        status,
        code,
        message,
        details=details,
        retry_after=retry_after,
        method=call.method,
        url=url,
    )
    return error


def segment(name: str, value: str) -> str:
    """One path parameter, percent-encoded whole (``/`` included).

    ``ValueError`` if empty, or ``.`` or ``..``: those stay dot segments however they are
    encoded, which HTTP clients (httpx included, RFC 3986 section 5.2.4) remove with the
    segment before them, so ``DELETE .../memories/..`` would go out as a ``DELETE`` of the
    store itself. The API refuses them as ids too."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string, not {value!r}")
    if value in (".", ".."):
        raise ValueError(f"{name} cannot be {value!r}: no id of this API is '.' or '..'")
    return quote(value, safe="")


def dump(model: pydantic.BaseModel, *, nulls: bool) -> dict[str, Any]:
    """A request model as JSON values: ``nulls=True`` sends the fields given (an explicit
    ``None`` as ``null``); ``nulls=False`` leaves every ``None`` out."""
    if nulls:
        return model.model_dump(mode="json", exclude_unset=True)
    return model.model_dump(mode="json", exclude_none=True)


def query(**values: str | int | bool | datetime | None) -> dict[str, str | int]:
    """Query parameters without the ones not given: booleans as ``true``/``false``, times as
    ISO 8601 (a naive one is sent as it is; the API reads it as UTC)."""
    found: dict[str, str | int] = {}
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            found[name] = "true" if value else "false"
        elif isinstance(value, datetime):
            found[name] = value.isoformat()
        else:
            found[name] = value
    return found


# --- the routes --------------------------------------------------------------------------------


def store_prefix(instance_id: str, name: str) -> str:
    """The encoded path of a store: ``/instances/{instance_id}/agent-memory/{store}``."""
    return f"/instances/{segment('instance_id', instance_id)}/agent-memory/{segment('store', name)}"


def list_organization_stores(
    cursor: str | None = None, limit: int | None = None
) -> Call[m.OrganizationStoreList]:
    params = query(cursor=cursor, limit=limit)
    return Call("GET", "/agent-memory", m.OrganizationStoreList, True, params=params)


def list_instance_stores(
    instance_id: str, cursor: str | None = None, limit: int | None = None
) -> Call[m.StoreList]:
    path = f"/instances/{segment('instance_id', instance_id)}/agent-memory"
    return Call("GET", path, m.StoreList, True, params=query(cursor=cursor, limit=limit))


def put_store(instance_id: str, name: str, settings: Mapping[str, Any]) -> Call[m.StoreView]:
    body = dump(m.StorePut.model_validate(dict(settings)), nulls=True)
    return Call("PUT", store_prefix(instance_id, name), m.StoreView, True, body=body)


def get_store(instance_id: str, name: str) -> Call[m.StoreView]:
    return Call("GET", store_prefix(instance_id, name), m.StoreView, True)


def delete_store(instance_id: str, name: str) -> Call[Any]:
    return Call("DELETE", store_prefix(instance_id, name), None, True)


def create_key(body: m.KeyCreate) -> Call[m.KeyCreated]:
    # not retried: a retry after a lost answer would make a second key (and lose the first)
    return Call("POST", "/keys", m.KeyCreated, False, body=dump(body, nulls=False))


def list_keys(cursor: str | None = None, limit: int | None = None) -> Call[m.KeyList]:
    return Call("GET", "/keys", m.KeyList, True, params=query(cursor=cursor, limit=limit))


def delete_key(key_id: str) -> Call[Any]:
    return Call("DELETE", f"/keys/{segment('key_id', key_id)}", None, True)


def organization_usage(first: date | str | None, last: date | str | None) -> Call[m.UsageReport]:
    """``GET /usage?from=&to=``: the organization's usage by UTC day (``_day``)."""
    params = query(**{"from": _day(first), "to": _day(last)})
    return Call("GET", "/usage", m.UsageReport, True, params=params)


def usage(store: str, first: date | str | None, last: date | str | None) -> Call[m.UsageReport]:
    """``GET .../usage?from=&to=``: the store's usage by UTC day (``_day``)."""
    params = query(**{"from": _day(first), "to": _day(last)})
    return Call("GET", f"{store}/usage", m.UsageReport, True, params=params)


def _day(value: date | str | None) -> str | None:
    """A day as the usage routes take it (``YYYY-MM-DD``): a date's, a datetime's date, or a
    text as given (the API refuses one that is not a day, 422 naming the field)."""
    if value is None or isinstance(value, str):
        return value
    return (value.date() if isinstance(value, datetime) else value).isoformat()


def rotate_webhook_secret(store: str) -> Call[m.WebhookSecret]:
    """``POST .../webhooks/secret``: a new signing secret, shown only in the answer."""
    # not retried: a retry after a lost answer would replace the secret it made, unseen
    return Call("POST", f"{store}/webhooks/secret", m.WebhookSecret, False)


def webhook_deliveries(store: str) -> Call[m.DeliveryList]:
    """``GET .../webhooks/deliveries``: the store's last 100 deliveries."""
    return Call("GET", f"{store}/webhooks/deliveries", m.DeliveryList, True)


def add_events(
    store: str,
    session_id: str,
    events: Sequence[m.EventIn | Mapping[str, Any]],
    actor_id: str | None,
    key: str | None = None,
) -> Call[m.EventsResult]:
    if isinstance(events, Mapping | str | bytes):
        raise TypeError("events must be a list of messages (dicts or EventIn)")
    request = m.EventsRequest(
        actor_id=actor_id,
        events=[e if isinstance(e, m.EventIn) else m.EventIn.model_validate(e) for e in events],
    )
    path = f"{store}/sessions/{segment('session_id', session_id)}/events"
    body = dump(request, nulls=False)
    return Call("POST", path, m.EventsResult, True, body=body, idempotency_key=idempotency_key(key))


def recall(
    store: str,
    session_id: str,
    query: str | None,
    actor_id: str | None,
    limit: int | None,
    query_vector: Sequence[float] | None,
    types: Sequence[str] | None = None,
    max_bytes: int | None = None,
    rerank: bool | None = None,
    min_score: float | None = None,
    reference_time: datetime | str | None = None,
    time_filter: bool | None = None,
) -> Call[m.RecallView]:
    request = m.RecallRequest(
        session_id=session_id,
        query=query,
        actor_id=actor_id,
        limit=limit,
        query_vector=list(query_vector) if query_vector is not None else None,
        types=list(types) if types is not None else None,
        max_bytes=max_bytes,
        rerank=rerank,
        min_score=min_score,
        reference_time=reference_time,
        time_filter=time_filter,
    )
    return Call("POST", f"{store}/recall", m.RecallView, True, body=dump(request, nulls=False))


def list_sessions(store: str, offset: int | None, limit: int | None) -> Call[m.SessionList]:
    params = query(offset=offset, limit=limit)
    return Call("GET", f"{store}/sessions", m.SessionList, True, params=params)


def get_session(
    store: str, session_id: str, recent: int | None, before_seq: int | None = None
) -> Call[m.SessionView]:
    path = f"{store}/sessions/{segment('session_id', session_id)}"
    return Call(
        "GET", path, m.SessionView, True, params=query(recent=recent, before_seq=before_seq)
    )


def delete_session(store: str, session_id: str) -> Call[Any]:
    return Call("DELETE", f"{store}/sessions/{segment('session_id', session_id)}", None, True)


def pop_message(store: str, session_id: str, key: str | None = None) -> Call[m.PoppedMessage]:
    path = f"{store}/sessions/{segment('session_id', session_id)}/pop"
    return Call("POST", path, m.PoppedMessage, True, idempotency_key=idempotency_key(key))


def extract(store: str, session_id: str, key: str | None = None) -> Call[m.ExtractionQueued]:
    path = f"{store}/sessions/{segment('session_id', session_id)}/extract"
    return Call("POST", path, m.ExtractionQueued, True, idempotency_key=idempotency_key(key))


def add_memory(store: str, memory: m.MemoryIn, key: str | None = None) -> Call[m.MemoryView]:
    body = dump(memory, nulls=False)
    return Call(
        "POST",
        f"{store}/memories",
        m.MemoryView,
        True,
        body=body,
        idempotency_key=idempotency_key(key),
    )


def list_memories(
    store: str,
    offset: int | None,
    limit: int | None,
    actor_id: str | None,
    type: str | None,
    filters: Mapping[str, Any],
) -> Call[m.MemoryList]:
    """``filters``: ``include_superseded``, ``as_of``, ``topics`` (a list, sent comma-separated,
    so no topic may hold a comma), ``metadata`` (a mapping, sent as compact JSON) and the
    ``created_*`` / ``occurred_*`` bounds; ``None`` ones are left out."""
    given = dict(filters)
    topics = given.pop("topics", None)
    if topics is not None:
        if isinstance(topics, str) or any("," in t for t in topics):
            raise ValueError("topics must be a list of topics without commas")
        given["topics"] = ",".join(topics)
    metadata = given.pop("metadata", None)
    if metadata is not None:
        given["metadata"] = json.dumps(dict(metadata), separators=(",", ":"), ensure_ascii=False)
    params = query(offset=offset, limit=limit, actor_id=actor_id, type=type, **given)
    return Call("GET", f"{store}/memories", m.MemoryList, True, params=params)


def search(store: str, request: m.SearchRequest) -> Call[m.SearchResult]:
    path = f"{store}/memories/search"
    return Call("POST", path, m.SearchResult, True, body=dump(request, nulls=False))


def get_memory(store: str, memory_id: str) -> Call[m.MemoryView]:
    return Call("GET", f"{store}/memories/{segment('memory_id', memory_id)}", m.MemoryView, True)


def update_memory(
    store: str, memory_id: str, patch: m.MemoryPatch, key: str | None = None
) -> Call[m.MemoryView]:
    path = f"{store}/memories/{segment('memory_id', memory_id)}"
    # Each PATCH keeps the previous state as a version: safe to send again only with its key.
    body = dump(patch, nulls=True)
    return Call("PATCH", path, m.MemoryView, True, body=body, idempotency_key=idempotency_key(key))


def delete_memory(store: str, memory_id: str) -> Call[Any]:
    return Call("DELETE", f"{store}/memories/{segment('memory_id', memory_id)}", None, True)


def forget_actor(store: str, actor_id: str) -> Call[m.ActorForgotten]:
    path = f"{store}/actors/{segment('actor_id', actor_id)}/memories"
    return Call("DELETE", path, m.ActorForgotten, True)


def get_profile(store: str, actor_id: str) -> Call[m.ProfileView]:
    path = f"{store}/actors/{segment('actor_id', actor_id)}/profile"
    return Call("GET", path, m.ProfileView, True)


def update_profile(
    store: str, actor_id: str, patch: m.ProfilePatch, key: str | None = None
) -> Call[m.ProfileView]:
    path = f"{store}/actors/{segment('actor_id', actor_id)}/profile"
    # Each change is kept as a version: safe to send again only with its key.
    body = dump(patch, nulls=True)
    return Call("PATCH", path, m.ProfileView, True, body=body, idempotency_key=idempotency_key(key))


def profile_history(store: str, actor_id: str, field: str) -> Call[m.ProfileHistory]:
    path = f"{store}/actors/{segment('actor_id', actor_id)}/profile/history"
    return Call("GET", path, m.ProfileHistory, True, params=query(field=field))


# --- keyed memories ----------------------------------------------------------------------------


def put_keyed_memory(store: str, body: m.KeyedMemoryPut) -> Call[m.KeyedMemoryView]:
    return Call(
        "PUT", f"{store}/keyed-memories", m.KeyedMemoryView, True, body=dump(body, nulls=False)
    )


def namespace_text(namespace: Sequence[str]) -> str:
    """A namespace as the ``namespace`` query parameter carries it: labels joined by ``.``;
    ``ValueError`` for an empty namespace, or a label that is empty, holds ``.`` or is not a
    string (the API could not tell its labels apart)."""
    labels = list(namespace) if not isinstance(namespace, str) else [namespace]
    if not labels:
        raise ValueError("a namespace has at least one label")
    for label in labels:
        if not isinstance(label, str) or not label or "." in label:
            raise ValueError(f"a namespace label is a non-empty string without '.', not {label!r}")
    return ".".join(labels)


def get_keyed_memory(
    store: str, namespace: Sequence[str], key: str, refresh_ttl: bool | None
) -> Call[m.KeyedMemoryView]:
    params = query(namespace=namespace_text(namespace), key=key, refresh_ttl=refresh_ttl)
    return Call("GET", f"{store}/keyed-memories", m.KeyedMemoryView, True, params=params)


def delete_keyed_memory(store: str, namespace: Sequence[str], key: str) -> Call[Any]:
    params = query(namespace=namespace_text(namespace), key=key)
    return Call("DELETE", f"{store}/keyed-memories", None, True, params=params)


def search_keyed_memories(store: str, body: m.KeyedSearchRequest) -> Call[m.KeyedSearchResult]:
    path = f"{store}/keyed-memories/search"
    return Call("POST", path, m.KeyedSearchResult, True, body=dump(body, nulls=False))


def list_keyed_namespaces(store: str, body: m.NamespacesRequest) -> Call[m.NamespaceList]:
    path = f"{store}/keyed-memories/namespaces"
    return Call("POST", path, m.NamespaceList, True, body=dump(body, nulls=False))


# --- export and import -------------------------------------------------------------------------


def export_session_ids(store: str, cursor: str | None, limit: int | None) -> Call[m.SessionIdPage]:
    params = query(cursor=cursor, limit=limit)
    return Call("GET", f"{store}/export/sessions", m.SessionIdPage, True, params=params)


def export_session(
    store: str, session_id: str, after_seq: int | None, limit: int | None
) -> Call[m.SessionExport]:
    path = f"{store}/export/sessions/{segment('session_id', session_id)}"
    params = query(after_seq=after_seq, limit=limit)
    return Call("GET", path, m.SessionExport, True, params=params)


def import_session(
    store: str, session_id: str, session: m.SessionImport
) -> Call[m.SessionImported]:
    path = f"{store}/import/sessions/{segment('session_id', session_id)}"
    return Call("PUT", path, m.SessionImported, True, body=dump(session, nulls=False))


def export_memories(store: str, cursor: str | None, limit: int | None) -> Call[m.MemoryExportPage]:
    params = query(cursor=cursor, limit=limit)
    return Call("GET", f"{store}/export/memories", m.MemoryExportPage, True, params=params)


def export_profiles(store: str, cursor: str | None, limit: int | None) -> Call[m.ProfileExportPage]:
    params = query(cursor=cursor, limit=limit)
    return Call("GET", f"{store}/export/profiles", m.ProfileExportPage, True, params=params)


def import_profiles(
    store: str, batch: m.ProfileImportBatch, key: str | None = None
) -> Call[m.ProfileImportResult]:
    body = dump(batch, nulls=True)
    path = f"{store}/import/profiles"
    key = idempotency_key(key)
    return Call("POST", path, m.ProfileImportResult, True, body=body, idempotency_key=key)


def import_memories(
    store: str, batch: m.MemoryImportBatch, key: str | None = None
) -> Call[m.MemoryImportResult]:
    body = dump(batch, nulls=False)
    return Call(
        "POST",
        f"{store}/import/memories",
        m.MemoryImportResult,
        True,
        body=body,
        idempotency_key=idempotency_key(key),
    )
