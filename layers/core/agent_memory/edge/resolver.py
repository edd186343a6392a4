"""The one resolver factory: ``Api`` builds the Powertools resolver every function uses.

Every function's handler module does::

    app = Api()

    @app.get("/route", ...)
    def route(...) -> SomeView: ...

    lambda_handler = app.lambda_handler

``Api`` adds, in front of Powertools' routing and validation: a body-size limit (413), the
caller's identity from the REQUEST authorizer's context (401 / 503, ``auth``), a strict JSON
parser and strict query parameters (``requests``), one error mapping (``http_errors``), and the
logger, metrics and tracer of ``observability``. Errors always have the shape
``{"error", "message", "details"?}``.
"""

from __future__ import annotations

import json
import re
import weakref
from collections.abc import Callable
from functools import partial
from http import HTTPStatus
from typing import Any, ClassVar

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.api_gateway import Route
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.middlewares.openapi_validation import (
    OpenAPIResponseValidationMiddleware,
)
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics.functions import is_metrics_disabled
from aws_lambda_powertools.shared.json_encoder import Encoder
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel

from agent_memory.answers import answer_ceiling, over_budget
from agent_memory.edge.auth import principal_from
from agent_memory.edge.http_errors import JSON, error_body, error_headers, status_of
from agent_memory.edge.requests import (
    StrictQueryValidation,
    body_bytes,
    decode_path,
    strict_json_loads,
    utf8_text,
)
from agent_memory.edge.runtime import Runtime, current_runtime
from agent_memory.errors import (
    AgentMemoryError,
    AnswerTooLarge,
    PayloadTooLarge,
    RouteNotFound,
    StoreNotFound,
    Unauthorized,
)
from agent_memory.flows.container import Caller
from agent_memory.flows.handle import StoreHandle
from agent_memory.models import Principal, problem_in_words
from agent_memory.observability import (
    REQUEST_ID_HEADER,
    annotate,
    clear_annotations,
    logger,
    metrics,
    request_trace,
)
from agent_memory.scopes import require_admin, require_write
from agent_memory.stores.idempotency import ONCE_CONTEXT, OnceKey

_cold = True
"""Whether this container has answered no request yet (the trace's ``ColdStart``)."""
_STORE_IN_PATH = re.compile(r"^/instances/[^/]+/agent-memory/([^/]+)")


def store_of_path(raw_path: str) -> str | None:
    """The store a request's path names (``/instances/<id>/agent-memory/<store>...``), for
    its trace annotations; None on routes of no store."""
    found = _STORE_IN_PATH.match(raw_path)
    return found.group(1) if found else None


# UTF-8 out, not \u escapes: smaller bodies, and text reads back exactly as it was sent.
_json_dumps = partial(json.dumps, separators=(",", ":"), ensure_ascii=False, cls=Encoder)


class ModelAnswers(OpenAPIResponseValidationMiddleware):
    """Powertools' response middleware, with the answer a route returns as its declared model
    written straight to JSON text by pydantic (``model_dump_json``: compact, by alias, UTF-8
    as ``_json_dumps`` writes it), in one pass in pydantic-core.

    Powertools would validate the model again against the route's return annotation (an
    instance of that very class passes as it is: pydantic does not re-validate instances),
    dump it to a dict of JSON values, and then the resolver would encode that dict with the
    standard library: about a tenth of a warm recall. Any other answer (a ``Response``, a
    dict, a subclass of the declared model) goes Powertools' way."""

    def __init__(self) -> None:
        super().__init__(validation_serializer=_json_dumps)

    def _handle_response(self, *, route: Route, response: Response[Any]) -> Response[Any]:
        field = route.dependant.return_param
        body = response.body
        if field is not None and isinstance(body, BaseModel) and type(body) is field.type_:
            response.body = body.model_dump_json(by_alias=True)
            return response
        answer: Response[Any] = super()._handle_response(route=route, response=response)
        return answer


class Api(APIGatewayHttpResolver):
    """The resolver every function uses: validation on, one error mapping, auth and size checks.

    Route code reads ``app.principal`` (who is calling) and ``app.runtime`` (services).
    """

    _instances: ClassVar[weakref.WeakSet[Api]] = weakref.WeakSet()

    def __init__(
        self,
        *,
        store_not_found_step: str = "",
        idempotent_writes: bool = False,
        reads: bool = False,
        last_read_settings: bool = False,
        admin_only: str = "",
    ) -> None:
        """``store_not_found_step``: the next step a 404 ``store_not_found`` names on this
        route (``CREATE_STORE_FIRST``, ``NOTHING_DELETED``); by default none.
        ``idempotent_writes``: the route writes into a store and takes an ``Idempotency-Key``
        (``edge.idempotency``; its handler declares ``IdempotencyKeyHeader``).
        ``reads``: a ``POST`` route that only reads (a search), which a read-only key may call;
        every other method but ``GET`` writes. ``last_read_settings``: the route's use case
        reads through ``StoreHandle.read``, so its store may start from the settings this
        container read last, confirmed in its first round trip (``stores.freshness``).
        ``admin_only``: only the organization's admin
        key (no scope) may call it; what the route does, as its 403 says it ("manages API
        keys")."""
        super().__init__(
            enable_validation=True,
            json_body_deserializer=strict_json_loads,
            serializer=_json_dumps,
        )
        # Powertools runs this one before any other middleware and the route (see
        # StrictQueryValidation); it is the resolver's own slot for its request validation.
        self._request_validation_middleware = StrictQueryValidation()
        self._response_validation_middleware = ModelAnswers()
        self._principal: Principal | None = None
        self._runtime: Runtime | None = None
        self._store_not_found_step = store_not_found_step
        self._reads = reads
        self._last_read_settings = last_read_settings
        self._admin_only = admin_only
        if idempotent_writes:  # imported here: the routes that only read never load it
            from agent_memory.edge.idempotency import IdempotentWrites

            self.use([IdempotentWrites(_json_dumps)])
        self.exception_handler(AgentMemoryError)(self._domain_error)
        self.exception_handler(RequestValidationError)(self._validation_error)
        self.exception_handler(NotFoundError)(self._route_not_found)
        self.not_found(self._route_not_found)
        self.exception_handler(Exception)(self._bug)
        Api._instances.add(self)
        self.lambda_handler: Callable[[dict[str, Any], LambdaContext], dict[str, Any]] = (
            logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)(
                metrics.log_metrics(self._entry)
            )
        )

    @classmethod
    def instances(cls) -> list[Api]:
        """Every ``Api`` of this process (one per function module loaded)."""
        return list(cls._instances)

    def prepare_routes(self) -> int:
        """Build now what Powertools builds at a route's first request (its validation
        models: the route's dependant and body field), for every route; how many routes.
        ``edge.snapstart`` calls it before Lambda's snapshot."""
        routes = self._static_routes + self._dynamic_routes
        for route in routes:
            _ = route.dependant, route.body_field
        return len(routes)

    def forget_request(self) -> None:
        """Drop the last request's caller and runtime (``edge.snapstart.forget``)."""
        self._principal = None
        self._runtime = None

    @property
    def principal(self) -> Principal:
        """The caller of the current request (set before routing); ``Unauthorized`` outside."""
        if self._principal is None:  # pragma: no cover - _entry always sets it before routing
            raise Unauthorized("Send your API key as 'Authorization: Bearer <key>'.")
        return self._principal

    @property
    def runtime(self) -> Runtime:
        """The container's services for the current request's settings."""
        if self._runtime is None:  # pragma: no cover
            self._runtime = current_runtime()
        return self._runtime

    @property
    def caller(self) -> Caller:
        """The current request's caller and container, as a use case of no one store takes
        them (``flows.container.Caller``)."""
        return Caller(self.principal, self.runtime)

    def store(self, instance_id: str, store: str) -> StoreHandle:
        """The caller's store ``store`` of ``instance_id``, as a use case takes it
        (``Runtime.store``: looked up once per request; ``InstanceNotFound`` /
        ``StoreNotFound``, also outside the key's scope)."""
        return self.runtime.store(
            self.principal, instance_id, store, last_read=self._last_read_settings
        )

    @property
    def once(self) -> OnceKey | None:
        """The ``OnceKey`` of the current request when it came with an ``Idempotency-Key``
        (``edge.idempotency.once_of``), for a write that records its own outcome."""
        once = self.context.get(ONCE_CONTEXT)
        return once if isinstance(once, OnceKey) else None

    def _entry(self, event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        global _cold
        cold, _cold = _cold, False
        request = event.get("requestContext") or {}
        request_id = str(request.get("requestId") or "")
        annotate(route=str(event.get("routeKey") or request.get("routeKey") or ""))
        try:
            with request_trace("lambda_handler", cold_start=cold):
                answer = self._answer(event, context)
        finally:
            clear_annotations()
        if request_id:
            answer["headers"] = {**(answer.get("headers") or {}), REQUEST_ID_HEADER: request_id}
        return answer

    def _answer(self, event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        # Every body is read as JSON whatever its Content-Type says (curl -d sends a form type).
        headers = {**(event.get("headers") or {}), "content-type": JSON}
        event = {**event, "rawPath": decode_path(event.get("rawPath", "/")), "headers": headers}
        annotate(store=store_of_path(event["rawPath"]))
        try:
            self._runtime = current_runtime()
            self._runtime.begin_request()
            self._principal = principal_from(event)
            annotate(organization=self._principal.org_id)
            self._check_access(self._principal, event)
            limit = self._runtime.settings.max_body_bytes
            body = body_bytes(event)
            if len(body) > limit:
                raise PayloadTooLarge(f"The request body is larger than {limit} bytes.")
            event["body"], event["isBase64Encoded"] = utf8_text(body), False
        except AgentMemoryError as exc:
            return self._raw_error(exc)
        try:
            return self._within_budget(self.resolve(event, context))
        finally:
            self._principal = None
            self._runtime.end_request()
            if is_metrics_disabled():
                # Powertools keeps disabled metrics and prints them every 100 values; drop them.
                metrics.clear_metrics()

    def _within_budget(self, answer: dict[str, Any]) -> dict[str, Any]:
        """``answer``, or a 409 ``answer_too_large`` in its place when its encoded body is over
        the function's ``answer_budget_bytes`` as Lambda carries it (``answers.over_budget``,
        which allows the ``answer_ceiling``'s 1/64 over):
        the one check every route's answer passes, so that none is Lambda's 500."""
        body = answer.get("body")
        if not isinstance(body, str):  # pragma: no cover - the resolver always writes text
            return answer
        budget = self.runtime.settings.answer_budget_bytes
        carried = over_budget(body, budget)
        if carried is None:
            return answer
        logger.warning("answer over its budget", extra={"bytes": carried, "budget": budget})
        ceiling = answer_ceiling(budget)
        return self._raw_error(
            AnswerTooLarge(
                f"The answer would be {carried:,} bytes, over the {ceiling:,} bytes an answer may "
                "carry (AWS Lambda answers at most 6 MB). Ask for less: a smaller limit, a "
                "narrower filter, or the next page of a listing (its next_cursor or "
                "next_offset)."
            )
        )

    def _check_access(self, principal: Principal, event: dict[str, Any]) -> None:
        """``Forbidden`` for a scoped key on an admin-only route, or a read-only key on a route
        that writes. Which ids a key reaches is checked where they are looked up
        (``Runtime.instance``, ``Runtime.store``), with a stranger's 404."""
        scope = principal.scope
        if scope is None:
            return
        if self._admin_only:
            require_admin(scope, self._admin_only)
        method = str(((event.get("requestContext") or {}).get("http") or {}).get("method", ""))
        if method.upper() not in ("GET", "HEAD", "OPTIONS") and not self._reads:
            require_write(scope)

    def _raw_error(self, exc: AgentMemoryError) -> dict[str, Any]:
        return {
            "statusCode": int(status_of(exc)),
            "headers": {"Content-Type": JSON, **error_headers(exc)},
            "body": error_body(exc.code, exc.message, exc.details),
            "isBase64Encoded": False,
        }

    def _domain_error(self, exc: AgentMemoryError) -> Response[str]:
        if isinstance(exc, StoreNotFound) and self._store_not_found_step:
            exc = StoreNotFound(exc.store, self._store_not_found_step)
        status = status_of(exc)
        if status >= 500:
            logger.warning("request failed", extra={"error": exc.code, "detail": exc.message})
        return Response(
            status_code=int(status),
            content_type=JSON,
            body=error_body(exc.code, exc.message, exc.details),
            headers=error_headers(exc),
        )

    def _validation_error(self, exc: RequestValidationError) -> Response[str]:
        details = []
        for error in exc.errors():
            loc = [str(part) for part in error.get("loc", ())]
            if loc and loc[0] in ("body", "query", "path") and len(loc) > 1:
                loc = loc[1:] if loc[0] == "body" else loc
            field = ".".join(loc) or "body"
            problem = problem_in_words(error)
            if error.get("type") == "json_invalid":
                field, problem = (
                    "body",
                    "The body is not valid JSON: "
                    + str((error.get("ctx") or {}).get("error", "parse error")),
                )
            details.append({"field": field, "problem": problem})
        return Response(
            status_code=HTTPStatus.UNPROCESSABLE_ENTITY,
            content_type=JSON,
            body=error_body("validation_error", "The request is not valid; see details.", details),
        )

    def _bug(self, exc: Exception) -> Response[str]:
        # The top boundary: an unexpected exception is a bug. Log it with its trace, and still
        # answer in the error shape, never with the request body or any secret.
        logger.exception("unhandled error")
        return Response(
            status_code=HTTPStatus.INTERNAL_SERVER_ERROR,
            content_type=JSON,
            body=error_body("internal_error", "Something went wrong on our side; it is logged."),
        )

    def _route_not_found(self, exc: Exception | None = None) -> Response[str]:
        event = self.current_event
        error = RouteNotFound(f"No route for {event.http_method} {event.path}.")
        return self._domain_error(error)
