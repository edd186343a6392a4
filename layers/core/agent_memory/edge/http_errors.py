"""The one place that maps domain errors to HTTP answers: the status of each error class, its
``Retry-After``, the JSON error shape, and the error answers each route declares in the
OpenAPI document.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from agent_memory.errors import (
    AgentMemoryError,
    Conflict,
    DatabaseUnavailable,
    Forbidden,
    IdempotencyKeyInProgress,
    KeyServiceUnavailable,
    NotFound,
    PayloadTooLarge,
    ProviderRejected,
    ProviderUnavailable,
    RateLimited,
    SchedulerUnavailable,
    SessionBusy,
    Unauthorized,
    ValidationFailed,
)
from agent_memory.models import (
    ErrorBody,
    ErrorDetail,
)

JSON = "application/json"

_STATUS: list[tuple[type[AgentMemoryError], HTTPStatus]] = [
    (Unauthorized, HTTPStatus.UNAUTHORIZED),
    (Forbidden, HTTPStatus.FORBIDDEN),
    (RateLimited, HTTPStatus.TOO_MANY_REQUESTS),
    (NotFound, HTTPStatus.NOT_FOUND),
    (Conflict, HTTPStatus.CONFLICT),
    (PayloadTooLarge, HTTPStatus.REQUEST_ENTITY_TOO_LARGE),
    (ValidationFailed, HTTPStatus.UNPROCESSABLE_ENTITY),
    (DatabaseUnavailable, HTTPStatus.SERVICE_UNAVAILABLE),
    (SchedulerUnavailable, HTTPStatus.SERVICE_UNAVAILABLE),
    (KeyServiceUnavailable, HTTPStatus.SERVICE_UNAVAILABLE),
    (ProviderUnavailable, HTTPStatus.SERVICE_UNAVAILABLE),
    (ProviderRejected, HTTPStatus.BAD_GATEWAY),
]

PROVIDER_RETRY_AFTER_SECONDS = 2
"""``Retry-After`` of a 503 ``provider_unavailable`` whose provider gave none."""

_COMMON_ERRORS = (
    HTTPStatus.UNAUTHORIZED,
    HTTPStatus.FORBIDDEN,
    HTTPStatus.TOO_MANY_REQUESTS,
    HTTPStatus.NOT_FOUND,
    HTTPStatus.CONFLICT,  # answer_too_large, on any route (agent_memory.answers)
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
    HTTPStatus.UNPROCESSABLE_ENTITY,
    HTTPStatus.INTERNAL_SERVER_ERROR,
    HTTPStatus.SERVICE_UNAVAILABLE,
)
_PROVIDER_ERRORS = (HTTPStatus.BAD_GATEWAY,)


def responses(
    success: dict[int, str] | None = None, errors: tuple[HTTPStatus, ...] = ()
) -> dict[int, OpenAPIResponse]:
    """A route's declared answers for the OpenAPI document: ``success`` (status -> description)
    and the error statuses every route can give (401, 403, 404, 409 ``answer_too_large``, 413,
    422, 429, 500, 503) plus ``errors``."""
    declared: dict[int, OpenAPIResponse] = {
        status: {"description": text} for status, text in (success or {200: "OK"}).items()
    }
    for status in (*_COMMON_ERRORS, *errors):
        declared[int(status)] = {
            "description": status.phrase,
            "content": {JSON: {"model": ErrorBody}},
        }
    return declared


ERROR_RESPONSES = responses()
WRITE_RESPONSES = responses(errors=(HTTPStatus.CONFLICT,))
PROVIDER_RESPONSES = responses(errors=(*_PROVIDER_ERRORS, HTTPStatus.CONFLICT))
"""Routes that may call a provider: 502 from it, and 409 ``stored_key_unreadable`` when the
store's provider key cannot be decrypted any more (and their own conflicts)."""


def status_of(exc: AgentMemoryError) -> HTTPStatus:
    """The HTTP status for a domain error (by class, never by message text)."""
    for cls, status in _STATUS:
        if isinstance(exc, cls):
            return status
    return HTTPStatus.INTERNAL_SERVER_ERROR


def error_body(code: str, message: str, details: list[dict[str, Any]] | None = None) -> str:
    """The JSON text of an error answer."""
    body = ErrorBody(
        error=code,
        message=message,
        details=[ErrorDetail(**d) for d in details] if details is not None else None,
    )
    return body.model_dump_json(exclude_none=True)


def error_headers(exc: AgentMemoryError) -> dict[str, str]:
    """The headers an error answer carries: ``Retry-After`` (seconds) on every 503 and on the
    409s that pass (``idempotency_key_in_progress``, ``session_busy``)."""
    if isinstance(
        exc,
        DatabaseUnavailable
        | SchedulerUnavailable
        | KeyServiceUnavailable
        | IdempotencyKeyInProgress
        | SessionBusy
        | RateLimited,
    ):
        return {"Retry-After": str(exc.retry_after_seconds)}
    if isinstance(exc, ProviderUnavailable):
        # Every 503 tells the client when to come back: the provider's own wait when it gave
        # one, else a short default (a provider that timed out may well answer the next call).
        return {"Retry-After": str(exc.retry_after_seconds or PROVIDER_RETRY_AFTER_SECONDS)}
    return {}
