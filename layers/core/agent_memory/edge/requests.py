"""How a request is read before any route sees it: a strict JSON body (RFC 8259 with I-JSON's
rules), strict query parameters read from the raw query string, a body in UTF-8 (base64 when API
Gateway says so), and a path whose segments are decoded only where that cannot move a route.
"""

from __future__ import annotations

import base64
import json
import re
import types
from typing import Any, Union, get_args, get_origin
from urllib.parse import parse_qsl, unquote

import jiter
from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.middlewares.openapi_validation import (
    OpenAPIRequestValidationMiddleware,
)
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.types import EventHandlerInstance

from agent_memory.errors import (
    ValidationFailed,
)


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


def body_bytes(event: dict[str, Any]) -> bytes:
    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        try:
            return base64.b64decode(body, validate=True)
        except ValueError as exc:
            raise ValidationFailed("The request body is not valid base64.") from exc
    return str(body).encode("utf-8", "surrogatepass")


def utf8_text(body: bytes) -> str:
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
