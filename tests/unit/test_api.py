"""The resolver's own rules: strict JSON, strict integer query parameters, the status of each
domain error, the caller."""

import json
from typing import Annotated

import pytest
from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import BaseModel

from agent_memory.edge.auth import principal_from
from agent_memory.edge.http_errors import status_of
from agent_memory.edge.requests import strict_json_loads
from agent_memory.edge.resolver import Api
from agent_memory.errors import (
    ActorMismatch,
    DatabaseUnavailable,
    InstanceNotFound,
    PayloadTooLarge,
    SessionNotFound,
    StoreNotFound,
    Unauthorized,
    ValidationFailed,
)
from local.template import read_http_api
from tests.support.common import ROOT
from tests.support.template import PARAMETERS

HTTP_API = read_http_api(ROOT / "template.yaml", PARAMETERS)


@pytest.mark.parametrize(
    "text",
    ['{"a": "\\ud83d"}', '{"a": "\\udc00x"}', '{"a": NaN}', '{"a": Infinity}', "[1,]", "{", ""],
)
def test_strict_json_rejects_what_cannot_be_stored_as_utf8(text):
    with pytest.raises(json.JSONDecodeError):
        strict_json_loads(text)


def test_strict_json_accepts_surrogate_pairs_and_raw_utf8():
    assert strict_json_loads('{"a": "\\ud83d\\ude00", "b": "👩‍💻"}') == {"a": "😀", "b": "👩‍💻"}


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"a": 1, "a": 1}', 'key "a" at line 1 column 14'),
        ('{"events": [], "actor_id": "u", "events": []}', 'key "events" at line 1 column 42'),
        ('{"metadata": {"k": 1, "k": 2}}', 'key "k" at line 1 column 27'),
        ('{"metadata": {"x": {"y": [{"z": 1, "z": 1}]}}}', 'key "z" at line 1 column 40'),
        (
            '{"events": [{"role": "user", "content": "a", "content": "b"}]}',
            'key "content" at line 1 column 56',
        ),
        ('{"events": [{}, {"role": "a", "role": "b"}]}', 'key "role" at line 1 column 38'),
        ('{"a": 1, "\\u0061": 2}', 'key "a" at line 1 column 19'),  # the same name, escaped
    ],
)
def test_strict_json_refuses_a_name_given_twice_at_any_depth(text, where):
    """RFC 7493 section 2.3; the column is the one just after the colon of the name given
    again."""
    with pytest.raises(json.JSONDecodeError) as refused:
        strict_json_loads(text)
    assert refused.value.msg == f"Detected duplicate {where}"


def test_strict_json_keeps_names_that_differ_and_the_same_name_in_other_objects():
    text = '{"events": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], '
    text += '"A": 1, "a": 2}'
    assert strict_json_loads(text)["events"][1] == {"role": "user", "content": "b"}
    assert strict_json_loads('{"x": {"a": 1}, "y": {"a": 1}}') == {"x": {"a": 1}, "y": {"a": 1}}


# --- integer query parameters --------------------------------------------------------------


class Echo(BaseModel):
    n: int


def _echo_app() -> Api:
    app = Api()

    @app.get("/echo")
    def echo(n: Annotated[int, Query(ge=0, le=1000)] = 0) -> Echo:
        return Echo(n=n)

    return app


def _get(app, path, query, monkeypatch):
    monkeypatch.setenv("KIVIDB_CONTROL_URL", "redis://127.0.0.1:1/0")  # never reached
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    event = {
        "version": "2.0",
        "routeKey": f"GET {path}",
        "rawPath": path,
        "rawQueryString": query,
        "queryStringParameters": _query_parameters(query),
        "headers": {},
        "requestContext": {
            "http": {"method": "GET", "path": path},
            "authorizer": {"lambda": {"org_id": "acme", "key_id": "key_1"}},
            "requestId": "r",
            "stage": "$default",
        },
        "isBase64Encoded": False,
    }
    answer = app.lambda_handler(event, _Context())
    return answer["statusCode"], json.loads(answer["body"])


def _query_parameters(query):
    """What API Gateway (payload 2.0) passes: values decoded, repeats joined with commas."""
    from urllib.parse import parse_qs

    return {k: ",".join(v) for k, v in parse_qs(query, keep_blank_values=True).items()}


class _Context:
    function_name = "test"
    memory_limit_in_mb = 128
    invoked_function_arn = "arn:aws:lambda:local:0:function:test"
    aws_request_id = "r"


NOT_DIGITS = [
    "5.0",
    "%2B5",
    "%205",
    "5%20",
    "-5",
    "5e0",
    "5_0",
    "0x5",
    "%D9%A5",
    "5%00",
    "",
    "5&n=6",
]
DIGITS_PROBLEM = (
    "must be a whole number written with the digits 0-9 only (no sign, decimal point, "
    "exponent, spaces or other characters), given once"
)


@pytest.mark.parametrize("value", NOT_DIGITS)
def test_an_integer_query_parameter_that_is_not_plain_digits_is_422(value, monkeypatch):
    status, body = _get(_echo_app(), "/echo", f"n={value}", monkeypatch)
    assert (status, body) == (
        422,
        {
            "error": "validation_error",
            "message": "The request is not valid; see details.",
            "details": [{"field": "query.n", "problem": DIGITS_PROBLEM}],
        },
    )


@pytest.mark.parametrize(("value", "n"), [("5", 5), ("05", 5), ("0", 0), ("1000", 1000)])
def test_plain_digits_in_range_are_an_integer(value, n, monkeypatch):
    assert _get(_echo_app(), "/echo", f"n={value}", monkeypatch) == (200, {"n": n})


def test_out_of_range_digits_are_still_the_range_error(monkeypatch):
    status, body = _get(_echo_app(), "/echo", "n=1001", monkeypatch)
    assert (status, body["details"]) == (
        422,
        [{"field": "query.n", "problem": "Input should be less than or equal to 1000"}],
    )


def _integer_query_parameters():
    """(route, parameter) of every integer query parameter in docs/openapi.json."""
    document = json.loads((ROOT / "docs" / "openapi.json").read_text())
    found = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "query" and parameter["schema"].get("type") == "integer":
                    found.append((f"{method.upper()} {path}", parameter["name"]))
    return found


def test_the_document_has_the_integer_query_parameters_of_the_routes():
    assert sorted(_integer_query_parameters()) == [
        ("GET /instances/{instance_id}/agent-memory/{store}/consolidations", "limit"),
        ("GET /instances/{instance_id}/agent-memory/{store}/consolidations", "offset"),
        ("GET /instances/{instance_id}/agent-memory/{store}/export/memories", "limit"),
        ("GET /instances/{instance_id}/agent-memory/{store}/export/profiles", "limit"),
        ("GET /instances/{instance_id}/agent-memory/{store}/export/sessions", "limit"),
        (
            "GET /instances/{instance_id}/agent-memory/{store}/export/sessions/{session_id}",
            "after_seq",
        ),
        ("GET /instances/{instance_id}/agent-memory/{store}/export/sessions/{session_id}", "limit"),
        ("GET /instances/{instance_id}/agent-memory/{store}/memories", "limit"),
        ("GET /instances/{instance_id}/agent-memory/{store}/memories", "offset"),
        ("GET /instances/{instance_id}/agent-memory/{store}/sessions", "limit"),
        ("GET /instances/{instance_id}/agent-memory/{store}/sessions", "offset"),
        ("GET /instances/{instance_id}/agent-memory/{store}/sessions/{session_id}", "recent"),
    ]


@pytest.mark.parametrize(("route", "name"), _integer_query_parameters())
@pytest.mark.parametrize("value", ["5.0", "%2B5", "%D9%A5"])
def test_every_integer_query_parameter_of_every_route_is_strict(route, name, value, monkeypatch):
    method, template = route.split(" ", 1)
    path = template.format(instance_id="local", store="demo", session_id="s1")
    found = HTTP_API.find(method, path)
    assert found is not None
    app = found[0].function.module().app
    status, body = _get(app, path, f"{name}={value}", monkeypatch)
    assert (status, body["details"]) == (
        422,
        [{"field": f"query.{name}", "problem": DIGITS_PROBLEM}],
    )


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (Unauthorized("x"), 401),
        (InstanceNotFound("i"), 404),
        (StoreNotFound("s"), 404),
        (SessionNotFound("s"), 404),
        (ActorMismatch("s", "a", "b"), 409),
        (PayloadTooLarge("x"), 413),
        (ValidationFailed("x"), 422),
        (DatabaseUnavailable("x"), 503),
    ],
)
def test_each_domain_error_has_its_status(error, status):
    assert status_of(error) == status


def _event(context):
    return {"requestContext": {"authorizer": {"lambda": context}}}


def test_principal_comes_from_the_authorizer_context():
    principal = principal_from(_event({"org_id": "acme", "key_id": "key_1"}))
    assert (principal.org_id, principal.key_id) == ("acme", "key_1")


def test_no_principal_is_unauthorized_and_an_outage_is_unavailable():
    with pytest.raises(Unauthorized, match="revoked"):
        principal_from(_event({"error": "unauthorized", "message": "revoked"}))
    with pytest.raises(Unauthorized):
        principal_from({"requestContext": {}})
    with pytest.raises(DatabaseUnavailable):
        principal_from(_event({"error": "database_unavailable", "message": "down"}))
