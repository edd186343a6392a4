"""The remote MCP server's Lambda handler and its API Gateway (payload 2.0) to ASGI adapter,
with the sample events of events/mcp_handler*.json and no network."""

from __future__ import annotations

import asyncio
import base64
import importlib.metadata
import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from kividb_memory.mcp.remote import (
    API_URL_ENV,
    LambdaAdapter,
    configured_api_url,
    response_of,
    scope_of,
)
from kividb_memory.mcp.tools import TOOL_NAMES
from local.template import load_template
from tests.support.common import ROOT
from tests.support.mcp import FUNCTION, sample


def rpc(method: str, params: dict[str, Any] | None = None, **headers: str) -> dict[str, Any]:
    event = sample()
    event["body"] = json.dumps(
        {"jsonrpc": "2.0", "id": 7, "method": method, "params": params or {}}
    )
    event["headers"] = {**event["headers"], **headers}
    return event


@pytest.fixture(scope="module")
def handler():
    return FUNCTION.load()


def test_the_sample_post_lists_the_six_tools_as_one_json_answer(handler):
    answer = handler(sample(), None)
    assert answer["statusCode"] == 200 and answer["isBase64Encoded"] is False
    assert answer["headers"]["content-type"] == "application/json"
    body = json.loads(answer["body"])
    assert body["id"] == 1
    assert [tool["name"] for tool in body["result"]["tools"]] == list(TOOL_NAMES)


@pytest.mark.parametrize("name", ["mcp_handler_get", "mcp_handler_delete"])
def test_get_and_delete_answer_405_allowing_post_only(handler, name):
    answer = handler(sample(name), None)
    assert answer["statusCode"] == 405
    assert answer["headers"]["allow"] == "POST"
    assert json.loads(answer["body"])["error"]["message"].startswith("Method Not Allowed")


def test_a_tool_call_without_a_key_is_a_tool_error_and_calls_nothing(handler):
    event = rpc("tools/call", {"name": "list_memory_stores", "arguments": {}})
    del event["headers"]["authorization"]
    body = json.loads(handler(event, None)["body"])
    assert body["result"]["isError"] is True
    assert body["result"]["content"][0]["text"] == (
        "Error executing tool list_memory_stores: KiviDB API error 401 unauthorized: send your "
        "API key as the MCP request's header 'Authorization: Bearer <key>'"
    )


def test_an_unknown_tool_and_a_bad_argument_are_errors_not_crashes(handler):
    unknown = json.loads(
        handler(rpc("tools/call", {"name": "nope", "arguments": {}}), None)["body"]
    )
    assert (
        unknown["result"]["isError"] is True and "nope" in unknown["result"]["content"][0]["text"]
    )
    bad = json.loads(
        handler(rpc("tools/call", {"name": "memory_recall", "arguments": {"limit": 500}}), None)[
            "body"
        ]
    )
    text = bad["result"]["content"][0]["text"]
    assert bad["result"]["isError"] is True
    assert "session_id\n  Field required" in text and "limit\n  Input should be less than" in text


def test_a_body_that_is_not_json_is_a_json_rpc_parse_error(handler):
    event = sample(body=base64.b64encode(b"\xff{not json").decode(), isBase64Encoded=True)
    answer = handler(event, None)
    assert answer["statusCode"] == 400
    assert json.loads(answer["body"])["error"]["code"] == -32700


def test_the_handler_can_be_awaited_on_a_running_loop_as_the_local_stack_does(handler):
    async def inside_a_loop() -> dict[str, Any]:
        return await handler.invoke_async(sample(), None)

    assert json.loads(asyncio.run(inside_a_loop())["body"])["result"]["tools"]


# --- the adapter ---------------------------------------------------------------------------------


def test_the_scope_takes_host_scheme_path_query_cookies_and_client_from_the_event():
    event = sample(rawPath="/v1/mcp", rawQueryString="a=1&b=%20", cookies=["x=1", "y=2"])
    scope = scope_of(event)
    headers = dict(scope["headers"])
    assert (scope["method"], scope["scheme"], scope["path"]) == ("POST", "https", "/v1/mcp")
    assert (scope["query_string"], scope["client"]) == (b"a=1&b=%20", ("127.0.0.1", 0))
    assert headers[b"cookie"] == b"x=1; y=2"
    assert headers[b"host"] == b"abc123.execute-api.us-east-1.amazonaws.com"
    assert scope["server"] == ("abc123.execute-api.us-east-1.amazonaws.com", 443)
    assert scope["aws.event"] is event


# The Host header is the caller's: the host of the scope is always the event's domainName (API
# Gateway's own record), whatever the header says, well formed or not.
HOSTILE_HOSTS = [
    "attacker.example",
    "abc123.execute-api.us-east-1.amazonaws.com:8443",
    "abc123.execute-api.us-east-1.amazonaws.com/evil?",
    "127.0.0.1:9",
    "[abc]",
    "[::1",
    "",
]


@pytest.mark.parametrize("host", HOSTILE_HOSTS)
def test_the_host_header_never_makes_the_scopes_host(host):
    event = sample()
    event["headers"]["host"] = host
    scope = scope_of(event)
    assert [v for k, v in scope["headers"] if k == b"host"] == [
        b"abc123.execute-api.us-east-1.amazonaws.com"
    ]
    assert scope["server"] == ("abc123.execute-api.us-east-1.amazonaws.com", 443)


@pytest.mark.parametrize("host", ["[abc]", "[::1", "attacker.example:1"])
def test_a_malformed_host_header_changes_nothing(handler, host):
    # "Host: [abc]" was a 500: the adapter parsed it as a URL (ValueError: Invalid IPv6 URL).
    event = sample()
    event["headers"]["host"] = host
    answer = handler(event, None)
    assert answer["statusCode"] == 200
    assert [t["name"] for t in json.loads(answer["body"])["result"]["tools"]] == list(TOOL_NAMES)


@pytest.mark.parametrize(
    ("proto", "scheme"), [(None, "https"), ("https", "https"), ("http", "http"), ("x,http", "http")]
)
def test_the_scheme_is_the_last_forwarded_proto_and_https_without_one(proto, scheme):
    event = sample()
    event["headers"].pop("x-forwarded-proto")
    if proto is not None:
        event["headers"]["x-forwarded-proto"] = proto
    assert scope_of(event)["scheme"] == scheme


# --- where tool calls go: the configured API only ----------------------------------------------


class Recorder:
    """A loopback HTTP server that records each request (path and Authorization) and answers
    what an API answers to GET /agent-memory, plus a marker of its own."""

    def __init__(self, marker: str) -> None:
        self.requests: list[tuple[str, str, str | None]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                recorder.requests.append(
                    (self.command, self.path, self.headers.get("authorization"))
                )
                body = json.dumps(
                    {
                        "stores": [],
                        "unreachable": [{"instance_id": marker, "error": "x", "message": marker}],
                    }
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.host = self.url.removeprefix("http://")
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def servers() -> Iterator[tuple[Recorder, Recorder]]:
    api, attacker = Recorder("the-api"), Recorder("the-attacker")
    yield api, attacker
    api.close()
    attacker.close()


def list_stores_event(host: str) -> dict[str, Any]:
    event = rpc("tools/call", {"name": "list_memory_stores", "arguments": {}})
    event["headers"].update({"host": host, "x-forwarded-proto": "http"})
    event["requestContext"]["domainName"] = "127.0.0.1"  # as the local stack sets it
    return event


def test_tool_calls_go_to_the_configured_api_never_to_the_host_the_caller_names(
    handler, servers, monkeypatch
):
    # Before: the API's address was the MCP request's URL less /mcp, so "Host: 127.0.0.1:<port>"
    # sent the caller's key to any loopback port, and its answer came back in the tool's result.
    api, attacker = servers
    monkeypatch.setenv(API_URL_ENV, api.url)
    answer = json.loads(handler(list_stores_event(attacker.host), None)["body"])
    assert answer["result"]["isError"] is False
    assert answer["result"]["structuredContent"]["unreachable"][0]["instance_id"] == "the-api"
    assert attacker.requests == []
    assert api.requests == [
        ("GET", "/agent-memory", "Bearer kvm_example_not_a_real_key_000000000000000000")
    ]


def test_without_a_configured_api_a_tool_call_is_a_tool_error_and_calls_nothing(
    handler, servers, monkeypatch
):
    _, attacker = servers
    monkeypatch.delenv(API_URL_ENV, raising=False)
    answer = json.loads(handler(list_stores_event(attacker.host), None)["body"])
    assert answer["result"]["isError"] is True
    assert answer["result"]["content"][0]["text"] == (
        "Error executing tool list_memory_stores: this MCP server has no API to call: "
        f"{API_URL_ENV} is not set in its environment (template.yaml sets it for McpFunction, "
        "the local stack for itself)"
    )
    assert attacker.requests == []


def scope_from(api_id: Any) -> dict[str, Any]:
    return {"aws.event": {"requestContext": {"apiId": api_id}}}


def test_the_configured_api_names_the_invoking_api_gateway_api_by_its_id():
    template = "https://{api_id}.execute-api.us-east-1.amazonaws.com"
    assert configured_api_url(template, scope_from("abc123")) == (
        "https://abc123.execute-api.us-east-1.amazonaws.com"
    )
    assert configured_api_url("http://127.0.0.1:3000/", {}) == "http://127.0.0.1:3000"


@pytest.mark.parametrize("api_id", [None, "", "evil.example/x", "a@b", "abc123:1", 5.5])
def test_an_api_id_that_is_not_one_is_a_tool_error(api_id):
    with pytest.raises(ToolError, match="did not come from API Gateway with its API id"):
        configured_api_url("https://{api_id}.execute-api.x.amazonaws.com", scope_from(api_id))


def test_the_template_configures_the_mcp_functions_api_without_a_circular_reference():
    template = load_template(ROOT / "template.yaml")
    variables = template["Resources"]["McpFunction"]["Properties"]["Environment"]["Variables"]
    assert variables[API_URL_ENV] == {
        "!Sub": "https://{api_id}.execute-api.${AWS::Region}.${AWS::URLSuffix}"
    }


def test_a_key_that_is_not_printable_ascii_is_a_tool_error_naming_the_header(handler, monkeypatch):
    monkeypatch.setenv(API_URL_ENV, "http://127.0.0.1:9")
    event = rpc("tools/call", {"name": "list_memory_stores", "arguments": {}})
    event["headers"]["authorization"] = "Bearer kvm_\u00e9t\u00e9"
    text = json.loads(handler(event, None)["body"])["result"]["content"][0]["text"]
    assert text.endswith(
        "the API key of the MCP request's header 'Authorization: Bearer <key>' must be "
        "printable ASCII without spaces"
    )


def test_the_response_joins_repeated_headers_moves_cookies_and_base64s_binary_bodies():
    answer = response_of(
        200,
        [(b"X-A", b"1"), (b"x-a", b"2"), (b"set-cookie", b"c=1"), (b"content-type", b"image/png")],
        b"\x89PNG",
    )
    assert answer == {
        "statusCode": 200,
        "headers": {"x-a": "1,2", "content-type": "image/png"},
        "cookies": ["c=1"],
        "body": base64.b64encode(b"\x89PNG").decode(),
        "isBase64Encoded": True,
    }


def test_an_asgi_app_that_answers_in_chunks_is_one_response():
    async def app(scope, receive, send):
        assert (await receive())["body"] == b"ping"
        await send(
            {
                "type": "http.response.start",
                "status": 201,
                "headers": [(b"content-type", b"text/plain")],
            }
        )
        await send({"type": "http.response.body", "body": b"po", "more_body": True})
        await send({"type": "http.response.body", "body": b"ng"})

    answer = LambdaAdapter(app)(sample(body="ping"), None)
    assert (answer["statusCode"], answer["body"], answer["isBase64Encoded"]) == (201, "pong", False)


# --- the function's package ------------------------------------------------------------------


def test_the_functions_pinned_packages_are_the_versions_the_tests_run():
    pins = re.findall(
        r"^([A-Za-z0-9_.-]+)==(\S+)$",
        (FUNCTION.code_dir / "requirements.txt").read_text(),
        re.MULTILINE,
    )
    assert ("mcp", "2.3.0") in pins
    assert {name: importlib.metadata.version(name) for name, _ in pins} == dict(pins)
    dev = (ROOT / "requirements-dev.txt").read_text()
    assert "mcp==2.3.0" in dev and re.search(r"^-e \./client\[[a-z,-]*\bmcp\b", dev, re.M)
