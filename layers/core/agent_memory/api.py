"""The one place that builds the Powertools resolver and maps domain errors to HTTP answers.

Every function's handler module does::

    app = Api()

    @app.get("/route", ...)
    def route(...) -> SomeView: ...

    lambda_handler = app.lambda_handler

``Api`` adds, in front of Powertools' routing and validation: a body-size limit (413), the
caller's identity from the REQUEST authorizer's context (401 / 503), a strict JSON parser
(lone surrogates, NaN, Infinity and a name given twice in an object are 422, never 500), and
strict query parameters (``StrictQueryValidation``: only the route's own, each given once,
integers written with digits only, booleans exactly ``true`` or ``false``). Errors always
have the shape ``{"error", "message", "details"?}``.

Why the authorizer never denies: API Gateway answers a denial with its own body
(``{"message": "Forbidden"}``, status 403) and a missing identity source with a bare 401, neither
in our error shape. So the authorizer always allows and says who the caller is, or why they are
not anyone, and this module turns "not anyone" into our 401 before any route code runs.
"""

from __future__ import annotations

import base64
import json
import re
import types
import warnings
from collections.abc import Callable
from functools import partial
from http import HTTPStatus
from typing import Annotated, Any, Union, get_args, get_origin
from urllib.parse import parse_qsl, unquote

import jiter
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.middlewares.openapi_validation import (
    OpenAPIRequestValidationMiddleware,
)
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Path
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.event_handler.types import EventHandlerInstance
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics.functions import is_metrics_disabled
from aws_lambda_powertools.shared.json_encoder import Encoder
from aws_lambda_powertools.utilities.typing import LambdaContext

from agent_memory.control import Principal
from agent_memory.errors import (
    AgentMemoryError,
    Conflict,
    DatabaseUnavailable,
    KeyServiceUnavailable,
    NotFound,
    PayloadTooLarge,
    ProviderRejected,
    ProviderUnavailable,
    RouteNotFound,
    SchedulerUnavailable,
    StoreNotFound,
    Unauthorized,
    ValidationFailed,
)
from agent_memory.memory_models import MEMORY_ID_PATTERN
from agent_memory.models import (
    INSTANCE_ID_PATTERN,
    SESSION_ID_PATTERN,
    STORE_NAME_PATTERN,
    ErrorBody,
    ErrorDetail,
)
from agent_memory.runtime import Runtime, current_runtime

logger = Logger()
metrics = Metrics()
# Most routes publish no metric of their own; Powertools would warn on every such invocation.
warnings.filterwarnings("ignore", message="No application metrics to publish")

JSON = "application/json"

_STATUS: list[tuple[type[AgentMemoryError], HTTPStatus]] = [
    (Unauthorized, HTTPStatus.UNAUTHORIZED),
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
    HTTPStatus.NOT_FOUND,
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
    and the error statuses every route can give (401, 404, 413, 422, 500, 503) plus ``errors``."""
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

# Path parameters, validated the same way on every route.
InstancePath = Annotated[str, Path(pattern=INSTANCE_ID_PATTERN, description="Database instance id")]
StorePath = Annotated[str, Path(pattern=STORE_NAME_PATTERN, description="Store name")]
SessionPath = Annotated[str, Path(pattern=SESSION_ID_PATTERN, description="Session id")]

MemoryPath = Annotated[str, Path(pattern=MEMORY_ID_PATTERN, description="Memory id")]
ActorPath = Annotated[str, Path(pattern=SESSION_ID_PATTERN, description="Actor id")]

STORE_ROUTE = "/instances/<instance_id>/agent-memory/<store>"

# What a 404 store_not_found tells the caller to do, on the routes where something fits: the
# routes that write into a store (a store is made with PUT on its own URL), and the deletes.
CREATE_STORE_FIRST = "create it with PUT first"
NOTHING_DELETED = "nothing was deleted"
SESSION_ROUTE = STORE_ROUTE + "/sessions/<session_id>"
MEMORY_ROUTE = STORE_ROUTE + "/memories/<memory_id>"


def no_content() -> Response[None]:
    """The 204 answer of a DELETE."""
    return Response(status_code=HTTPStatus.NO_CONTENT, body=None)


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


def _headers(exc: AgentMemoryError) -> dict[str, str]:
    if isinstance(exc, (DatabaseUnavailable, SchedulerUnavailable, KeyServiceUnavailable)):
        return {"Retry-After": str(exc.retry_after_seconds)}
    if isinstance(exc, ProviderUnavailable):
        # Every 503 tells the client when to come back: the provider's own wait when it gave
        # one, else a short default (a provider that timed out may well answer the next call).
        return {"Retry-After": str(exc.retry_after_seconds or PROVIDER_RETRY_AFTER_SECONDS)}
    return {}


def strict_json_loads(text: str) -> Any:
    """Parse a request body as strict JSON: RFC 8259 with the rules of I-JSON (RFC 7493).

    Refused: a name given twice in one object, at any depth (RFC 8259 section 4 leaves the
    outcome to the parser, where most keep the last and so drop data without a word; RFC 7493
    section 2.3 forbids it), lone surrogate escapes such as ``"\\ud83d"`` (RFC 7493 section
    2.1), ``NaN``, ``Infinity``, trailing commas, and any top-level value other than an object.
    One pass of jiter, the parser inside pydantic-core, which checks names as it reads (about
    80 us for a 100-event body of 24 KB). Raises ``json.JSONDecodeError`` (its message says
    where: ``Detected duplicate key "role" at line 1 column 52``), which Powertools reports as a
    validation error (422)."""
    try:
        value = jiter.from_json(
            text.encode("utf-8"), allow_inf_nan=False, catch_duplicate_keys=True
        )
    except ValueError as exc:  # UnicodeEncodeError (a lone surrogate character) is one too
        raise json.JSONDecodeError(str(exc), text, 0) from exc
    if not isinstance(value, dict):
        # Every body of this API is an object; Powertools would quietly take a list's first item.
        raise json.JSONDecodeError("the body must be a JSON object", text, 0)
    return value


_DIGITS = re.compile(r"[0-9]+")
INTEGER_QUERY_PROBLEM = (
    "must be a whole number written with the digits 0-9 only (no sign, decimal point, "
    "exponent, spaces or other characters), given once"
)


BOOLEAN_QUERY_PROBLEM = "must be true or false, in lower case, given once"
REPEATED_QUERY_PROBLEM = "must be given once"
MAX_QUERY_ERRORS = 10
"""At most this many query parameters are named in one 422 (a query of thousands of unknown
names answers ten)."""


def _is_type(annotation: Any, wanted: type) -> bool:
    """Whether a parameter annotated ``annotation`` is ``wanted`` (``wanted`` or
    ``wanted | None``); ``bool`` is not an ``int`` here."""
    if annotation is wanted:
        return True
    if get_origin(annotation) in (Union, types.UnionType):
        return wanted in get_args(annotation)
    return False


def query_pairs(event: dict[str, Any]) -> list[tuple[str, str]]:
    """The query of a payload 2.0 event as ``(name, value)`` pairs in order, repeats kept:
    read from ``rawQueryString`` (``parse_qsl``, blank values kept, names and values
    percent-decoded as API Gateway decodes ``queryStringParameters``), which tells a name
    given twice from one value holding a comma (``queryStringParameters`` joins repeats with
    commas). An event without ``rawQueryString`` (one made by hand) gives its
    ``queryStringParameters``."""
    raw = event.get("rawQueryString")
    if raw:
        return parse_qsl(str(raw), keep_blank_values=True)
    return [(str(k), str(v)) for k, v in (event.get("queryStringParameters") or {}).items()]


class StrictQueryValidation(OpenAPIRequestValidationMiddleware):
    """Powertools' request validation, after rules of ours for the query of every route, read
    from the raw query string (``query_pairs``). A refusal is a ``RequestValidationError``
    naming ``query.<name>`` (at most ``MAX_QUERY_ERRORS`` of them), so the route never runs:

    - a name the route does not declare is refused, as an unknown body field is (``?recnt=5``
      would otherwise be ignored and the default used): ``is not a parameter of this route; it
      takes <its parameters>``;
    - every parameter is given once (``REPEATED_QUERY_PROBLEM``);
    - an integer (``recent``, ``offset``, ``limit``...) is ASCII digits ``0-9`` and nothing
      else (``INTEGER_QUERY_PROBLEM``): pydantic's lax integers would take ``5.0``, ``+5``,
      `` 5`` and ``5_0`` as 5;
    - a boolean (``include_superseded``) is exactly ``true`` or ``false``
      (``BOOLEAN_QUERY_PROBLEM``): pydantic's lax booleans would take ``1``, ``yes``, ``on``,
      ``True``.

    Range and pattern checks stay the route's (``Query(ge=..., le=...)``).
    """

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]

    def handler(self, app: EventHandlerInstance, next_middleware: NextMiddleware) -> Response[Any]:
        """Check the raw query against the route's query parameters, then validate as
        Powertools does."""
        route = app.context["_route"]
        declared = {field.alias: field for field in route.dependant.query_params}
        pairs = query_pairs(app.current_event.raw_event)
        counts: dict[str, int] = {}
        for name, _ in pairs:
            counts[name] = counts.get(name, 0) + 1
        takes = ", ".join(sorted(declared)) or "none"
        errors = []
        for name, value in dict(pairs).items():
            field = declared.get(name)
            if field is None:
                problem, kind = f"is not a parameter of this route; it takes {takes}", "unknown"
            elif _is_type(field.field_info.annotation, bool):
                if counts[name] == 1 and value in ("true", "false"):
                    continue
                problem, kind = BOOLEAN_QUERY_PROBLEM, "boolean_true_false"
            elif _is_type(field.field_info.annotation, int):
                if counts[name] == 1 and _DIGITS.fullmatch(value):
                    continue
                problem, kind = INTEGER_QUERY_PROBLEM, "integer_digits"
            elif counts[name] > 1:
                problem, kind = REPEATED_QUERY_PROBLEM, "repeated"
            else:
                continue
            errors.append({"loc": ("query", name), "msg": problem, "type": kind, "input": value})
            if len(errors) == MAX_QUERY_ERRORS:
                break
        if errors:
            raise RequestValidationError(errors)
        return super().handler(app, next_middleware)


# UTF-8 out, not \u escapes: smaller bodies, and text reads back exactly as it was sent.
_json_dumps = partial(json.dumps, separators=(",", ":"), ensure_ascii=False, cls=Encoder)


def _body_bytes(event: dict[str, Any]) -> bytes:
    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        try:
            return base64.b64decode(body, validate=True)
        except ValueError as exc:
            raise ValidationFailed("The request body is not valid base64.") from exc
    return str(body).encode("utf-8", "surrogatepass")


def _utf8(body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationFailed(
            f"The request body is not UTF-8 (bad byte at offset {exc.start}); send UTF-8 JSON.",
            details=[{"field": "body", "problem": "not valid UTF-8"}],
        ) from exc


# Characters an id may hold (the union of the id alphabets of DESIGN section 2).
_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:@-")


def decode_path(raw_path: str) -> str:
    """Percent-decode each path segment whose decoded text is made of id characters only.

    Other segments stay encoded, so ``%2F`` can never split one parameter into two segments and
    reach another route, and a decoded ``?``, ``#`` or NUL cannot hide from validation: the
    ``%`` left in the segment fails the id pattern (422).
    """
    segments = []
    for segment in raw_path.split("/"):
        decoded = unquote(segment)
        segments.append(decoded if set(decoded) <= _ID_CHARS else segment)
    return "/".join(segments)


def principal_from(event: dict[str, Any]) -> Principal:
    """The caller as the authorizer described it in ``requestContext.authorizer.lambda``."""
    context = ((event.get("requestContext") or {}).get("authorizer") or {}).get("lambda") or {}
    if context.get("org_id"):
        return Principal(org_id=str(context["org_id"]), key_id=str(context.get("key_id", "")))
    if context.get("error") == DatabaseUnavailable.code:
        raise DatabaseUnavailable(str(context.get("message", "The database is unavailable.")))
    raise Unauthorized(str(context.get("message") or "Send 'Authorization: Bearer <api key>'."))


def authorize(event: dict[str, Any], runtime: Runtime) -> dict[str, Any]:
    """The REQUEST authorizer's answer (payload 2.0, simple responses).

    Always ``isAuthorized: true``; ``context`` holds ``org_id`` and ``key_id`` for a valid key,
    or ``error`` and ``message`` otherwise (see the module docstring for why). The key itself
    is never logged or echoed.
    """
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    value = headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    try:
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("Send your API key as 'Authorization: Bearer <key>'.")
        principal = runtime.control.authenticate(token.strip())
    except AgentMemoryError as exc:
        return {"isAuthorized": True, "context": {"error": exc.code, "message": exc.message}}
    return {
        "isAuthorized": True,
        "context": {"org_id": principal.org_id, "key_id": principal.key_id},
    }


class Api(APIGatewayHttpResolver):
    """The resolver every function uses: validation on, one error mapping, auth and size checks.

    Route code reads ``app.principal`` (who is calling) and ``app.runtime`` (services).
    """

    def __init__(self, *, store_not_found_step: str = "") -> None:
        """``store_not_found_step``: the next step a 404 ``store_not_found`` names on this
        route (``CREATE_STORE_FIRST``, ``NOTHING_DELETED``); by default none."""
        super().__init__(
            enable_validation=True,
            json_body_deserializer=strict_json_loads,
            serializer=_json_dumps,
        )
        # Powertools runs this one before any other middleware and the route (see
        # StrictQueryValidation); it is the resolver's own slot for its request validation.
        self._request_validation_middleware = StrictQueryValidation()
        self._principal: Principal | None = None
        self._runtime: Runtime | None = None
        self._store_not_found_step = store_not_found_step
        self.exception_handler(AgentMemoryError)(self._domain_error)
        self.exception_handler(RequestValidationError)(self._validation_error)
        self.exception_handler(NotFoundError)(self._route_not_found)
        self.not_found(self._route_not_found)
        self.exception_handler(Exception)(self._bug)
        self.lambda_handler: Callable[[dict[str, Any], LambdaContext], dict[str, Any]] = (
            logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)(
                metrics.log_metrics(self._entry)
            )
        )

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

    def _entry(self, event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        # Every body is read as JSON whatever its Content-Type says (curl -d sends a form type).
        headers = {**(event.get("headers") or {}), "content-type": JSON}
        event = {**event, "rawPath": decode_path(event.get("rawPath", "/")), "headers": headers}
        try:
            self._runtime = current_runtime()
            self._principal = principal_from(event)
            limit = self._runtime.settings.max_body_bytes
            body = _body_bytes(event)
            if len(body) > limit:
                raise PayloadTooLarge(f"The request body is larger than {limit} bytes.")
            event["body"], event["isBase64Encoded"] = _utf8(body), False
        except AgentMemoryError as exc:
            return self._raw_error(exc)
        try:
            return self.resolve(event, context)
        finally:
            self._principal = None
            if is_metrics_disabled():
                # Powertools keeps disabled metrics and prints them every 100 values; drop them.
                metrics.clear_metrics()

    def _raw_error(self, exc: AgentMemoryError) -> dict[str, Any]:
        return {
            "statusCode": int(status_of(exc)),
            "headers": {"Content-Type": JSON, **_headers(exc)},
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
            headers=_headers(exc),
        )

    def _validation_error(self, exc: RequestValidationError) -> Response[str]:
        details = []
        for error in exc.errors():
            loc = [str(part) for part in error.get("loc", ())]
            if loc and loc[0] in ("body", "query", "path") and len(loc) > 1:
                loc = loc[1:] if loc[0] == "body" else loc
            field = ".".join(loc) or "body"
            problem = str(error.get("msg", "invalid")).removeprefix("Value error, ")
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
