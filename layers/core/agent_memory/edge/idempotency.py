"""Idempotent writes over HTTP: the ``Idempotency-Key`` header of the writing ``POST`` and
``PATCH`` routes (draft-ietf-httpapi-idempotency-key-header), as one middleware that every such
route's ``Api`` runs (``Api(idempotent_writes=True)``).

A request with the header is identified by its fingerprint (``request_fingerprint``: method,
path, query and body, the body as canonical JSON so that key order and spacing do not count).
The first request with a key runs; its answer, when it is a success (2xx), is kept with the key
for 24 hours (``stores.idempotency``) and every later request with that key and fingerprint gets
exactly that answer, with ``Idempotent-Replayed: true``, and writes nothing. An error answer is
not kept (bad input wrote nothing, a 503 may be retried): the key is given back, and the next
request with it runs afresh. The same key with another request is 422
``idempotency_key_reused``; while the first is running, another waits for its answer up to
``WAIT_SECONDS``, then 409 ``idempotency_key_in_progress`` with ``Retry-After``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.middlewares import BaseMiddlewareHandler, NextMiddleware
from aws_lambda_powertools.event_handler.openapi.params import Header

from agent_memory.edge.requests import query_pairs
from agent_memory.errors import AgentMemoryError
from agent_memory.observability import logger
from agent_memory.stores.idempotency import (
    IDEMPOTENCY_KEY_PATTERN,
    ONCE_CONTEXT,
    Answered,
    OnceKey,
    key_digest,
    key_of,
)

IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"

IdempotencyKeyHeader = Annotated[
    str | None,
    Header(
        alias=IDEMPOTENCY_KEY_HEADER.lower(),
        pattern=IDEMPOTENCY_KEY_PATTERN,
        description=(
            "1-255 visible ASCII characters of your choosing (a UUID is usual). The same key "
            "with the same request within 24 hours answers what the first answered and writes "
            "nothing more; with another request it is 422 idempotency_key_reused; while the "
            "first is running, 409 idempotency_key_in_progress."
        ),
    ),
]
"""The header as a route parameter: validated (422 naming ``header.idempotency-key``) and in
the OpenAPI document. The middleware reads it from the request itself."""


def _same_number(value: Any) -> Any:
    """``value`` with each number that is a whole number written as one (``1.0``, ``1e0``,
    ``-0.0``) as that integer: the routes read them as the same value."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _same_number(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_same_number(v) for v in value]
    return value


def request_fingerprint(method: str, path: str, query: list[tuple[str, str]], body: str) -> str:
    """SHA-256 (hex) of what makes two requests the same request: ``method``, ``path``
    (decoded), the ``query`` pairs in order of name and value, and ``body`` as canonical JSON
    (keys sorted, no spaces, whole numbers as integers: ``1``, ``1.0`` and ``1e0`` are one
    value; the body as it came when it is not JSON)."""
    try:
        canonical = json.dumps(
            _same_number(json.loads(body)),
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
    except ValueError:
        canonical = body
    parts = [method.upper(), path, json.dumps(sorted(query)), canonical]
    return hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


class IdempotentWrites(BaseMiddlewareHandler[Any]):
    """The middleware: ``serialize`` is the resolver's JSON encoder (an answer kept is the text
    the first caller got, byte for byte). Errors: those of ``stores.idempotency`` and of the
    route; the key is given back whenever the route fails."""

    def __init__(self, serialize: Callable[[Any], str]) -> None:
        super().__init__()
        self._serialize = serialize

    def handler(self, app: Any, next_middleware: NextMiddleware) -> Response[Any]:
        """The route's answer, or the first answer of the request's key: a request without
        the header runs as it is; with it, as the module says."""
        event = app.current_event
        header = event.headers.get(IDEMPOTENCY_KEY_HEADER)  # Powertools': any case of the name
        if header is None:
            return next_middleware(app)
        key = key_of(header)
        if app.principal.scope is not None:
            # A scoped key's keys are its own: it can neither replay nor detect a write that
            # another key (the admin's, reaching more) sent with the same Idempotency-Key.
            key = f"{key}\x00{app.principal.key_id}"
        route_args = app.context.get("_route_args") or {}
        # A route that takes no body ignores one, so it is not part of the request either.
        takes_body = bool(app.context["_route"].dependant.body_params)
        handle = app.runtime.store(app.principal, route_args["instance_id"], route_args["store"])
        records = handle.idempotency
        fingerprint = request_fingerprint(
            event.http_method,
            event.path,
            query_pairs(event.raw_event),
            (event.body or "") if takes_body else "",
        )
        found = records.begin(key, fingerprint)
        app.context[ONCE_CONTEXT] = OnceKey(key_digest(key), fingerprint)
        if isinstance(found, Answered):
            return Response(
                status_code=found.status,
                content_type=found.content_type,
                body=found.body,
                headers={REPLAYED_HEADER: "true"},
            )
        try:
            response = next_middleware(app)
        except BaseException:
            _give_back(records.release, found)
            raise
        if not 200 <= response.status_code < 300:
            _give_back(records.release, found)
            return response
        body = response.body
        text = body if isinstance(body, str) else self._serialize(body) if body is not None else ""
        response.body = text
        try:
            records.finish(
                found, response.status_code, response.headers.get("Content-Type", ""), text
            )
        except AgentMemoryError as exc:
            # The write is done: its answer goes out. A retry finds the claim running until its
            # lease ends (409), then runs again; that is the window docs/routes.md names.
            logger.warning("idempotency record not kept", extra={"error": exc.code})
        return response


def _give_back(release: Callable[[Any], None], claim: Any) -> None:
    """Release ``claim``; when the database cannot be reached for that either, the claim ends
    with its lease (``LEASE_MS``) and the route's own error is the answer."""
    with contextlib.suppress(AgentMemoryError):
        release(claim)
