"""Who is calling: the REQUEST authorizer's answer for an ``Authorization: Bearer`` key, and the
caller read back from that answer on every route.

Why the authorizer never denies: API Gateway answers a denial with its own body
(``{"message": "Forbidden"}``, status 403) and a missing identity source with a bare 401, neither
in our error shape. So the authorizer always allows and says who the caller is, or why they are
not anyone, and ``principal_from`` turns "not anyone" into our 401 before any route code runs.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from agent_memory.errors import (
    AgentMemoryError,
    DatabaseUnavailable,
    QuotaExceeded,
    RateLimited,
    Unauthorized,
)
from agent_memory.models import INSTANCE_ID_PATTERN, STORE_NAME_PATTERN, Principal

if TYPE_CHECKING:
    from agent_memory.edge.runtime import Runtime
    from agent_memory.scopes import KeyScope


def principal_from(event: dict[str, Any]) -> Principal:
    """The caller as the authorizer described it in ``requestContext.authorizer.lambda``."""
    context = ((event.get("requestContext") or {}).get("authorizer") or {}).get("lambda") or {}
    if context.get("org_id"):
        scope = None
        if context.get("scope"):
            from agent_memory.scopes import KeyScope

            scope = KeyScope.from_text(str(context["scope"]))
        return Principal(
            org_id=str(context["org_id"]), key_id=str(context.get("key_id", "")), scope=scope
        )
    if context.get("error") == DatabaseUnavailable.code:
        raise DatabaseUnavailable(str(context.get("message", "The database is unavailable.")))
    if context.get("error") in (RateLimited.code, QuotaExceeded.code):
        kind = QuotaExceeded if context["error"] == QuotaExceeded.code else RateLimited
        raise kind(
            str(context.get("message", "Too many requests.")),
            int(context.get("retry_after") or 1),
            str(context.get("limit") or "requests_per_second"),
        )
    raise Unauthorized(str(context.get("message") or "Send 'Authorization: Bearer <api key>'."))


_INSTANCE_ID = re.compile(INSTANCE_ID_PATTERN)
_STORE_NAME = re.compile(STORE_NAME_PATTERN)


def usage_field(event: dict[str, Any], scope: KeyScope | None = None) -> str:
    """Where the authorizer counts a request in the day's usage (``control.usage``): its route
    key under the store its path names, or under no store for a route of none, a path whose
    instance or store could not be one, or a store the key's ``scope`` does not reach (so a
    key cannot add to the figures of a store it has no access to); empty (not counted)
    without a route key."""
    from agent_memory.control.usage import ROUTE_COUNTER
    from agent_memory.database.keys import ControlKeys

    route = str(event.get("routeKey") or "")
    if not route or route == "$default":
        return ""
    params = event.get("pathParameters") or {}
    instance, store = str(params.get("instance_id", "")), str(params.get("store", ""))
    named = bool(_INSTANCE_ID.fullmatch(instance) and _STORE_NAME.fullmatch(store))
    if not named or (scope is not None and not scope.allows_store(instance, store)):
        instance = store = ""
    return ControlKeys.usage_field(instance, store, ROUTE_COUNTER + route)


def _authenticate_and_take(event: dict[str, Any], token: str, runtime: Runtime) -> Principal:
    """The principal of ``token`` with the request taken from its buckets and counted: in one
    round trip for a key this container has seen (the step that takes checks that the key's
    record still says what was seen, so a revocation counts from the next request on, as with
    a read of the record), else a read of the record and that step."""
    keys, limits = runtime.api_keys, runtime.limits
    seen = keys.seen(token)
    if seen is not None:
        principal = seen.principal
        field = usage_field(event, principal.scope)
        if limits.take(
            principal.org_id, principal.key_id, field, key_record=(seen.record, seen.scope_text)
        ):
            return principal
        keys.forget(seen)
    principal = keys.authenticate(token)
    limits.take(principal.org_id, principal.key_id, usage_field(event, principal.scope))
    return principal


def authorize(event: dict[str, Any], runtime: Runtime) -> dict[str, Any]:
    """The REQUEST authorizer's answer (payload 2.0, simple responses).

    Always ``isAuthorized: true``; ``context`` holds ``org_id`` and ``key_id`` for a valid key
    (and ``scope``, its ``KeyScope`` as JSON, for a scoped key), or ``error`` and ``message``
    otherwise (see the module docstring for why). A request let through is counted in the
    day's usage (``usage_field``) in the step that takes its token. The key itself
    is never logged or echoed.
    """
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    value = headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    try:
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("Send your API key as 'Authorization: Bearer <key>'.")
        principal = _authenticate_and_take(event, token.strip(), runtime)
    except RateLimited as exc:
        refused = {"error": exc.code, "message": exc.message, "limit": exc.limit}
        return {
            "isAuthorized": True,
            "context": {**refused, "retry_after": exc.retry_after_seconds},
        }
    except AgentMemoryError as exc:
        return {"isAuthorized": True, "context": {"error": exc.code, "message": exc.message}}
    context = {"org_id": principal.org_id, "key_id": principal.key_id}
    if principal.scope is not None:
        context["scope"] = principal.scope.to_text()
    return {"isAuthorized": True, "context": context}
