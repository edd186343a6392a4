"""The client's exceptions: one per kind of failure a caller handles differently.

::

    KiviDBError
    ├── ApiError                  the API answered with an error status
    │   ├── AuthenticationError   401 (no key, an unknown or revoked key)
    │   ├── PermissionDeniedError 403 (API Gateway's own "Forbidden")
    │   ├── NotFoundError         404 (no such instance, store, session, memory or route)
    │   ├── ConflictError         409 (actor_mismatch, conflict, stored_key_unreadable...)
    │   ├── PayloadTooLargeError  413
    │   ├── ValidationError       422 (``details`` names each field and its problem)
    │   ├── RateLimitedError      429 (API Gateway throttling)
    │   └── ServerError           5xx
    │       ├── BadGatewayError   502 (the store's model provider refused the call)
    │       └── UnavailableError  503 (database, scheduler, key service or provider unavailable)
    ├── ApiConnectionError        no answer: the API could not be reached, or timed out
    └── UnexpectedResponseError   an answer the client cannot read (not the API's shape)

An ``ApiError`` carries the answer's ``status``, the API's error ``code`` (``store_not_found``,
``validation_error``...; ``http_<status>`` for an answer without one, such as API Gateway's own
``{"message": ...}``), its ``message``, ``details`` and ``retry_after`` (seconds, from the
``Retry-After`` header), and the request's ``method`` and ``url``. Never the API key: it is
sent in a header, and no exception holds headers.
"""

from __future__ import annotations

from collections.abc import Sequence

from kividb_memory.models import ErrorDetail


class KiviDBError(Exception):
    """Base of every exception this client raises."""


class ApiError(KiviDBError):
    """The API answered ``status`` (4xx or 5xx) with the error ``code`` and ``message``."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        details: Sequence[ErrorDetail] = (),
        retry_after: float | None = None,
        method: str = "",
        url: str = "",
    ) -> None:
        super().__init__(status, code, message)
        self.status = status
        self.code = code
        self.message = message
        self.details = list(details)
        self.retry_after = retry_after
        self.method = method
        self.url = url

    def __str__(self) -> str:
        text = f"{self.status} {self.code}: {self.message}"
        if self.details:
            text += " (" + "; ".join(f"{d.field}: {d.problem}" for d in self.details) + ")"
        return text

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status}, code={self.code!r}, "
            f"message={self.message!r}, details={self.details!r}, retry_after={self.retry_after!r})"
        )


class AuthenticationError(ApiError):
    """401: no API key was sent, or the key is unknown or revoked."""


class PermissionDeniedError(ApiError):
    """403: API Gateway refused the request itself."""


class NotFoundError(ApiError):
    """404: ``instance_not_found``, ``store_not_found``, ``session_not_found``,
    ``memory_not_found``, or a route that does not exist."""


class ConflictError(ApiError):
    """409: ``actor_mismatch`` (the session belongs to another actor), ``conflict`` (e.g. a new
    ``dimensions`` while the store holds memories; extraction without a language model),
    ``stored_key_unreadable``."""


class PayloadTooLargeError(ApiError):
    """413: the body is over the API's size limit (or more than 100 events)."""


class ValidationError(ApiError):
    """422: the request is not valid; ``details`` lists each field and its problem."""


class RateLimitedError(ApiError):
    """429: throttled (by API Gateway, before any work was done); ``retry_after`` when given."""


class ServerError(ApiError):
    """5xx: the server failed (500), its model provider did (502), or it is unavailable (503)."""


class BadGatewayError(ServerError):
    """502: the store's model provider refused the call (``provider_rejected``) or answered
    vectors that do not fit the store (``embedding_mismatch``)."""


class UnavailableError(ServerError):
    """503: a database, the scheduler, the key service or the model provider is unavailable
    for now; ``retry_after`` says how long to wait (seconds) when the API said."""


class ApiConnectionError(KiviDBError):
    """No answer: the API could not be reached (``connected=False``: nothing was sent), or the
    connection broke or timed out after the request was sent (``connected=True``: it may have
    been processed). Raised ``from`` the httpx exception."""

    def __init__(self, message: str, *, method: str = "", url: str = "", connected: bool) -> None:
        super().__init__(message)
        self.message = message
        self.method = method
        self.url = url
        self.connected = connected


class UnexpectedResponseError(KiviDBError):
    """An answer the client cannot read: a success whose body is not the documented model, or
    an error status whose body is not JSON. ``status`` is the HTTP status."""

    def __init__(self, message: str, *, status: int, method: str = "", url: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.method = method
        self.url = url


_BY_STATUS: dict[int, type[ApiError]] = {
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    422: ValidationError,
    429: RateLimitedError,
    502: BadGatewayError,
    503: UnavailableError,
}


def error_class(status: int) -> type[ApiError]:
    """The exception class for an error ``status``: the table above, ``ServerError`` for any
    other 5xx, ``ApiError`` for any other status."""
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return ServerError if status >= 500 else ApiError
