"""Query parameters are read as strictly as bodies (``agent_memory.api.StrictQueryValidation``):
a boolean is exactly ``true`` or ``false``, a name the route does not take is 422 naming it,
and no parameter may be given twice; on a toy route, then on every route of the template."""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import parse_qs

import pytest
from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import BaseModel

from agent_memory.edge.resolver import Api
from local.template import read_http_api
from tests.support.common import ROOT
from tests.support.template import PARAMETERS

HTTP_API = read_http_api(ROOT / "template.yaml", PARAMETERS)
INVALID = {"error": "validation_error", "message": "The request is not valid; see details."}
BOOLEAN = "must be true or false, in lower case, given once"
ONCE = "must be given once"


class Echo(BaseModel):
    n: int
    flag: bool
    word: str | None


def echo_app() -> Api:
    app = Api()

    @app.get("/echo")
    def echo(
        n: Annotated[int, Query(ge=0, le=1000)] = 0,
        flag: Annotated[bool, Query()] = False,
        word: Annotated[str | None, Query(max_length=20)] = None,
    ) -> Echo:
        return Echo(n=n, flag=flag, word=word)

    @app.get("/bare")
    def bare() -> Echo:
        return Echo(n=0, flag=False, word=None)

    return app


class Context:
    function_name = "test"
    memory_limit_in_mb = 128
    invoked_function_arn = "arn:aws:lambda:local:0:function:test"
    aws_request_id = "r"


def event(method: str, path: str, query: str, route_key: str | None = None) -> dict[str, Any]:
    """A payload 2.0 event as API Gateway sends it: the raw query, and the decoded parameters
    with repeated values joined by commas."""
    given = {k: ",".join(v) for k, v in parse_qs(query, keep_blank_values=True).items()}
    return {
        "version": "2.0",
        "routeKey": route_key or f"{method} {path}",
        "rawPath": path,
        "rawQueryString": query,
        **({"queryStringParameters": given} if given else {}),
        "headers": {},
        "requestContext": {
            "http": {"method": method, "path": path},
            "authorizer": {"lambda": {"org_id": "acme", "key_id": "key_1"}},
            "requestId": "r",
            "stage": "$default",
        },
        "isBase64Encoded": False,
    }


def get(app: Api, path: str, query: str, monkeypatch) -> tuple[int, Any]:
    monkeypatch.setenv("KIVIDB_CONTROL_URL", "redis://127.0.0.1:1/0")  # never reached
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    answer = app.lambda_handler(event("GET", path, query), Context())
    return answer["statusCode"], json.loads(answer["body"])


def refused(*details: tuple[str, str]) -> dict[str, Any]:
    return {**INVALID, "details": [{"field": f, "problem": p} for f, p in details]}


@pytest.mark.parametrize(("raw", "value"), [("true", True), ("false", False)])
def test_a_boolean_is_true_or_false(raw, value, monkeypatch):
    assert get(echo_app(), "/echo", f"flag={raw}", monkeypatch) == (
        200,
        {"n": 0, "flag": value, "word": None},
    )


@pytest.mark.parametrize(
    "raw",
    ["1", "0", "yes", "no", "on", "off", "True", "FALSE", "t", "", "true%20", "true&flag=true"],
)
def test_a_boolean_other_than_true_or_false_is_422(raw, monkeypatch):
    assert get(echo_app(), "/echo", f"flag={raw}", monkeypatch) == (
        422,
        refused(("query.flag", BOOLEAN)),
    )


def test_an_unknown_parameter_is_422_naming_it_and_what_the_route_takes(monkeypatch):
    assert get(echo_app(), "/echo", "recnt=5&n=1", monkeypatch) == (
        422,
        refused(("query.recnt", "is not a parameter of this route; it takes flag, n, word")),
    )
    assert get(echo_app(), "/bare", "x=1&y", monkeypatch) == (
        422,
        refused(
            ("query.x", "is not a parameter of this route; it takes none"),
            ("query.y", "is not a parameter of this route; it takes none"),
        ),
    )


def test_a_parameter_given_twice_is_422_whatever_its_type(monkeypatch):
    assert get(echo_app(), "/echo", "word=a&word=b", monkeypatch) == (
        422,
        refused(("query.word", ONCE)),
    )
    assert get(echo_app(), "/echo", "word=a&word=a", monkeypatch) == (
        422,
        refused(("query.word", ONCE)),
    )


def test_a_value_with_a_comma_given_once_is_one_value(monkeypatch):
    assert get(echo_app(), "/echo", "word=a%2Cb", monkeypatch) == (
        200,
        {"n": 0, "flag": False, "word": "a,b"},
    )


def test_many_unknown_parameters_are_named_at_most_ten_times(monkeypatch):
    query = "&".join(f"p{i}=1" for i in range(50))
    status, body = get(echo_app(), "/bare", query, monkeypatch)
    assert status == 422 and len(body["details"]) == 10
    assert body["details"][0] == {
        "field": "query.p0",
        "problem": "is not a parameter of this route; it takes none",
    }


API_ROUTES = [
    route
    for route in HTTP_API.routes
    if route.function.handler.split(".")[0] not in ("mcp_handler", "console")
]


@pytest.mark.parametrize("route", API_ROUTES, ids=lambda r: f"{r.method} {r.path}")
def test_every_route_refuses_a_parameter_it_does_not_take(route, monkeypatch):
    """Before any database is reached (the control URL goes nowhere): 422, never 200."""
    monkeypatch.setenv("KIVIDB_CONTROL_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    path = route.path.replace("{instance_id}", "db").replace("{store}", "s")
    for name in ("session_id", "memory_id", "actor_id", "proxy+"):
        path = path.replace("{" + name + "}", "x")
    handler = route.function.load()
    answer = handler(
        event(route.method, path, "bogus_parameter=1", f"{route.method} {route.path}"), Context()
    )
    body = json.loads(answer["body"])
    assert answer["statusCode"] == 422, body
    assert body["details"][0]["field"] == "query.bogus_parameter"
    assert body["details"][0]["problem"].startswith("is not a parameter of this route; it takes ")
