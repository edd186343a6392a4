"""template.yaml wiring as the local stack reads it: routes, handlers, authorizer, samples."""

import json
from pathlib import Path

import pytest

from local.template import load_template, read_http_api
from tests.conftest import ROOT

PARAMETERS = {
    "ControlRedisUrl": "redis://127.0.0.1:1/0",
    "SecretKey": "k" * 44,
    "SubnetIds": "",
    "SecurityGroupIds": "",
    "LogRetentionDays": "30",
    "LogLevel": "INFO",
}

EXPECTED_ROUTES = {
    "GET /agent-memory",
    "GET /instances/{instance_id}/agent-memory",
    "PUT /instances/{instance_id}/agent-memory/{store}",
    "GET /instances/{instance_id}/agent-memory/{store}",
    "DELETE /instances/{instance_id}/agent-memory/{store}",
    "POST /instances/{instance_id}/agent-memory/{store}/sessions/{session_id}/events",
    "GET /instances/{instance_id}/agent-memory/{store}/sessions",
    "GET /instances/{instance_id}/agent-memory/{store}/sessions/{session_id}",
    "DELETE /instances/{instance_id}/agent-memory/{store}/sessions/{session_id}",
    "POST /instances/{instance_id}/agent-memory/{store}/recall",
    "POST /instances/{instance_id}/agent-memory/{store}/memories",
    "GET /instances/{instance_id}/agent-memory/{store}/memories",
    "POST /instances/{instance_id}/agent-memory/{store}/memories/search",
    "GET /instances/{instance_id}/agent-memory/{store}/memories/{memory_id}",
    "PATCH /instances/{instance_id}/agent-memory/{store}/memories/{memory_id}",
    "DELETE /instances/{instance_id}/agent-memory/{store}/memories/{memory_id}",
    "DELETE /instances/{instance_id}/agent-memory/{store}/actors/{actor_id}/memories",
}


@pytest.fixture(scope="module")
def api():
    return read_http_api(ROOT / "template.yaml", PARAMETERS)


def test_every_route_of_the_contract_has_one_function(api):
    keys = [route.route_key for route in api.routes]
    assert set(keys) == EXPECTED_ROUTES
    assert len(keys) == len(set(keys))
    functions = [route.function.logical_id for route in api.routes]
    assert len(functions) == len(set(functions)), "one function per route"


def test_handler_modules_exist_and_are_uniquely_named(api):
    modules = [route.function.handler.split(".")[0] for route in api.routes]
    assert len(modules) == len(set(modules))
    for route in api.routes:
        module = route.function.handler.split(".")[0]
        assert (route.function.code_dir / f"{module}.py").is_file()


def test_the_default_authorizer_is_the_authorizer_function(api):
    assert api.authorizer is not None
    assert api.authorizer.logical_id == "AuthorizerFunction"


def test_every_function_has_a_sample_event_that_matches_its_route(api):
    for route in api.routes:
        module = route.function.handler.split(".")[0]
        event = json.loads((ROOT / "events" / f"{module}.json").read_text())
        assert event["routeKey"] == route.route_key
        assert route.match(event["requestContext"]["http"]["method"], event["rawPath"]) is not None
    assert (ROOT / "events" / "authorizer.json").is_file()


def test_more_literal_segments_win(api):
    route, params = api.find("GET", "/instances/db/agent-memory/s/sessions")
    assert route.path.endswith("/sessions")
    assert params == {"instance_id": "db", "store": "s"}
    route, params = api.find("GET", "/instances/db/agent-memory/s/sessions/a:b@c")
    assert params["session_id"] == "a:b@c"
    assert api.find("GET", "/nowhere") is None
    assert api.find("PATCH", "/agent-memory") is None


def test_environment_resolves_parameters(api):
    assert api.environment["KIVIDB_CONTROL_URL"] == PARAMETERS["ControlRedisUrl"]
    assert api.environment["POWERTOOLS_SERVICE_NAME"] == "agent-memory"


def test_globals_declare_runtime_architecture_and_layer():
    template = load_template(Path(ROOT / "template.yaml"))
    function = template["Globals"]["Function"]
    assert function["Runtime"] == "python3.12"
    assert function["Architectures"] == ["arm64"]
    assert function["Layers"] == [{"!Ref": "CoreLayer"}]
    for name, resource in template["Resources"].items():
        if resource["Type"] == "AWS::Serverless::Function":
            group = template["Resources"][f"{name}LogGroup"]
            assert group["Properties"]["RetentionInDays"] == {"!Ref": "LogRetentionDays"}
