"""The remote MCP server's Lambda handler and its API Gateway (payload 2.0) to ASGI adapter,
with the sample events of events/mcp_handler*.json and no network."""

from __future__ import annotations

import asyncio
import base64
import importlib.metadata
import json
import re
from typing import Any

import pytest

from kividb_memory.mcp.remote import LambdaAdapter, api_base, response_of, scope_of
from kividb_memory.mcp.tools import TOOL_NAMES
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
    event["headers"]["host"] = "abc123.execute-api.us-east-1.amazonaws.com"
    scope = scope_of(event)
    headers = dict(scope["headers"])
    assert (scope["method"], scope["scheme"], scope["path"]) == ("POST", "https", "/v1/mcp")
    assert (scope["query_string"], scope["client"]) == (b"a=1&b=%20", ("127.0.0.1", 0))
    assert headers[b"cookie"] == b"x=1; y=2"
    assert scope["server"] == ("abc123.execute-api.us-east-1.amazonaws.com", 443)


def test_a_host_header_naming_another_domain_gives_way_to_the_events_domain_name():
    event = sample()
    event["headers"]["host"] = "attacker.example"
    assert (
        dict(scope_of(event)["headers"])[b"host"] == b"abc123.execute-api.us-east-1.amazonaws.com"
    )


@pytest.mark.parametrize(
    ("proto", "scheme"), [(None, "https"), ("https", "https"), ("http", "http"), ("x,http", "http")]
)
def test_the_scheme_is_the_last_forwarded_proto_and_https_without_one(proto, scheme):
    event = sample()
    event["headers"].pop("x-forwarded-proto")
    if proto is not None:
        event["headers"]["x-forwarded-proto"] = proto
    assert scope_of(event)["scheme"] == scheme


def test_the_local_stacks_host_keeps_its_port():
    event = sample()
    event["headers"].update({"host": "127.0.0.1:3000", "x-forwarded-proto": "http"})
    event["requestContext"]["domainName"] = "127.0.0.1"
    scope = scope_of(event)
    assert dict(scope["headers"])[b"host"] == b"127.0.0.1:3000"
    assert scope["server"] == ("127.0.0.1", 3000)


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("https://h.example/mcp", "https://h.example"),
        ("https://h.example/v1/mcp?x=1", "https://h.example/v1"),
        ("http://127.0.0.1:3000/mcp", "http://127.0.0.1:3000"),
    ],
)
def test_the_api_base_is_the_mcp_url_less_its_final_mcp(url, base):
    assert api_base(url) == base


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
        await send({"type": "http.response.start", "status": 201,
                    "headers": [(b"content-type", b"text/plain")]})  # fmt: skip
        await send({"type": "http.response.body", "body": b"po", "more_body": True})
        await send({"type": "http.response.body", "body": b"ng"})

    answer = LambdaAdapter(app)(sample(body="ping"), None)
    assert (answer["statusCode"], answer["body"], answer["isBase64Encoded"]) == (201, "pong", False)


# --- the function's package ------------------------------------------------------------------


def test_the_functions_pinned_packages_are_the_versions_the_tests_run():
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", (FUNCTION.code_dir / "requirements.txt")
                      .read_text(), re.MULTILINE)  # fmt: skip
    assert ("mcp", "2.3.0") in pins
    assert {name: importlib.metadata.version(name) for name, _ in pins} == dict(pins)
    dev = (ROOT / "requirements-dev.txt").read_text()
    assert "mcp==2.3.0" in dev and "-e ./client[mcp]" in dev
