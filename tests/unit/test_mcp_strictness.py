"""The remote MCP server reads its JSON-RPC body as strictly as the API reads a body: a name
given twice in an object (at any depth), ``NaN`` or ``Infinity`` is a JSON-RPC parse error, a
body over the limit is 413 in JSON-RPC's error shape; and the tools' arguments are strict on
every transport: no coercion (``true``, ``"5"`` and ``5.0`` are not integers). Through the
Lambda handler with the sample events, no network."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kividb_memory.mcp.remote import MAX_BODY_BYTES
from tests.support.mcp import FUNCTION, sample


@pytest.fixture(scope="module")
def handler():
    return FUNCTION.load()


def post(handler, body: str) -> tuple[int, str, Any]:
    answer = handler(sample(body=body), None)
    return (
        answer["statusCode"],
        answer["headers"].get("content-type", ""),
        json.loads(answer["body"]),
    )


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ('{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "method": "ping"}', '"method"'),
        ('{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "tools/list"}', '"id"'),
        (
            '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": '
            '"memory_recall", "arguments": {"session_id": "a", "session_id": "b"}}}',
            '"session_id"',
        ),
    ],
)
def test_a_name_given_twice_is_a_json_rpc_parse_error(handler, body, where):
    status, content_type, answer = post(handler, body)
    assert (status, content_type) == (400, "application/json")
    assert answer["jsonrpc"] == "2.0" and answer["id"] is None
    assert answer["error"]["code"] == -32700
    assert answer["error"]["message"].startswith(f"Parse error: Detected duplicate key {where}")


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_a_parse_error(handler, literal):
    body = (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": '
        f'"memory_recall", "arguments": {{"session_id": "a", "limit": {literal}}}}}}}'
    )
    status, _, answer = post(handler, body)
    assert status == 400 and answer["error"]["code"] == -32700


def test_a_body_over_the_limit_is_413_in_json_rpc_shape(handler):
    big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "pad": "x" * MAX_BODY_BYTES})
    status, content_type, answer = post(handler, big)
    assert (status, content_type) == (413, "application/json")
    assert answer == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": f"Request body too large: at most {MAX_BODY_BYTES} bytes",
        },
    }


def test_a_strict_body_still_reaches_the_tools(handler):
    status, _, answer = post(handler, '{"jsonrpc": "2.0", "id": 3, "method": "tools/list"}')
    assert status == 200 and len(answer["result"]["tools"]) == 6


def call(handler, tool: str, arguments: dict[str, Any]) -> str:
    body = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    _, _, answer = post(handler, json.dumps(body))
    assert answer["result"]["isError"] is True
    return str(answer["result"]["content"][0]["text"])


@pytest.mark.parametrize("limit", [True, "5", 5.0, "5.0"])
def test_an_integer_argument_is_not_coerced(handler, limit):
    text = call(handler, "memory_recall", {"session_id": "a", "limit": limit})
    assert "limit\n  Input should be a valid integer" in text


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"session_id": 5}, "session_id\n  Input should be a valid string"),
        ({"session_id": "a", "query": 1}, "query\n  Input should be a valid string"),
        (
            {"session_id": "a", "messages": [{"role": "user", "content": 1}]},
            "messages.0.content\n  Input should be a valid string",
        ),
    ],
)
def test_other_arguments_are_not_coerced_either(handler, arguments, problem):
    tool = "memory_add_messages" if "messages" in arguments else "memory_recall"
    assert problem in call(handler, tool, arguments)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ('[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', "a batch"),
        ("[]", "a batch"),
        ('"ping"', "one JSON-RPC message, a JSON object"),
        ("12", "one JSON-RPC message, a JSON object"),
        ("null", "one JSON-RPC message, a JSON object"),
        ("{}", '"jsonrpc": "2.0"'),
        ('{"jsonrpc": "1.0", "id": 1, "method": "ping"}', '"jsonrpc": "2.0"'),
        ('{"jsonrpc": "2.0", "id": 1, "method": 5}', '"method" must be a string'),
        ('{"jsonrpc": "2.0", "id": null, "method": "ping"}', '"id" must be'),
        ('{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', '"id" must be'),
        ('{"jsonrpc": "2.0", "id": 1e400, "method": "ping"}', '"id" must be'),
        ('{"jsonrpc": "2.0", "id": true, "method": "ping"}', '"id" must be'),
        ('{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', '"id" must be'),
        ('{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": []}', '"params" must'),
    ],
)
def test_a_body_that_is_not_one_json_rpc_message_is_invalid_request_never_silence(
    handler, body, problem
):
    status, content_type, answer = post(handler, body)
    assert (status, content_type) == (400, "application/json")
    assert answer["id"] is None and answer["error"]["code"] == -32600
    assert problem in answer["error"]["message"]


def test_an_invalid_request_does_not_repeat_the_body(handler):
    body = '[{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"note": "sk-live-12345"}}]'
    _, _, answer = post(handler, body)
    assert "sk-live" not in json.dumps(answer)


@pytest.mark.parametrize(
    "body",
    [
        '{"jsonrpc": "2.0", "method": "notifications/initialized"}',
        '{"jsonrpc": "2.0", "id": 1, "result": {}}',
    ],
)
def test_notifications_and_responses_are_still_accepted_with_202(handler, body):
    answer = handler(sample(body=body), None)
    assert answer["statusCode"] == 202
