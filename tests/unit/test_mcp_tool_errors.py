"""Every tool error names its reason: the argument and the problem, never the SDK's bare
``Error executing tool <name>`` (what an exception the tools did not turn into a tool error
becomes). The tools in process, through the SDK's own client, with an API that is never
reached (every call here is refused before a request is made), and the remote server's headers
through its Lambda handler."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from mcp import Client

from kividb_memory.client import MemoryClient
from kividb_memory.mcp.remote import API_URL_ENV
from kividb_memory.mcp.tools import TOOL_NAMES, Connection, Defaults, build_server
from tests.support.mcp import FUNCTION, sample

NOWHERE = "http://127.0.0.1:9"  # nothing listens: a request made would be "could not connect"
WHERE = {"instance_id": "local", "store": "lab"}
REQUIRED: dict[str, dict[str, Any]] = {
    "list_memory_stores": {},
    "memory_add_messages": {"session_id": "s", "messages": [{"role": "user", "content": "x"}]},
    "memory_recall": {"session_id": "s"},
    "memory_search": {"query": "q", "mode": "keyword"},
    "memory_add": {"text": "t"},
    "memory_forget": {"memory_id": "mem_1"},
}
# Each tool's arguments that become a segment of the API's path.
PATH_ARGUMENTS = {
    "list_memory_stores": ["instance_id"],
    "memory_add_messages": ["session_id", "instance_id", "store"],
    "memory_recall": ["instance_id", "store"],  # its session_id goes in the body
    "memory_search": ["instance_id", "store"],
    "memory_add": ["instance_id", "store"],
    "memory_forget": ["memory_id", "instance_id", "store"],
}
CASES = [
    (tool, argument, value)
    for tool, arguments in PATH_ARGUMENTS.items()
    for argument in arguments
    for value in (".", "..")
]


def call_all(calls: list[tuple[str, dict[str, Any]]], defaults: Defaults | None = None) -> list:
    client = MemoryClient(NOWHERE, "kvm_test", max_retries=0)
    connection = Connection(client, defaults or Defaults())
    server = build_server(lambda ctx: connection)

    async def go() -> list:
        async with Client(server) as mcp:
            return [await mcp.call_tool(name, args) for name, args in calls]

    try:
        return asyncio.run(go())
    finally:
        client.close()


def test_the_cases_cover_every_tool():
    assert set(PATH_ARGUMENTS) == set(REQUIRED) == set(TOOL_NAMES)


def test_a_dot_segment_id_is_a_tool_error_naming_the_argument_and_the_problem():
    # Before: a store or instance_id of "." or ".." was "Error executing tool memory_recall"
    # and nothing more (the client's ValueError escaped the tool, and the SDK hides its text).
    calls = []
    for tool, argument, value in CASES:
        args = {**REQUIRED[tool], **(WHERE if tool != "list_memory_stores" else {})}
        calls.append((tool, {**args, argument: value}))
    results = call_all(calls)
    for (tool, argument, value), result in zip(CASES, results, strict=True):
        text = "".join(block.text for block in result.content)
        assert result.is_error, (tool, argument, value)
        assert text == (
            f"Error executing tool {tool}: {argument} cannot be {value!r}: no id of this API "
            "is '.' or '..'"
        ), (tool, argument, value)


@pytest.mark.parametrize("field", ["instance_id", "store"])
def test_a_dot_segment_default_is_a_tool_error_naming_the_argument_too(field):
    defaults = Defaults(**{"instance_id": "local", "store": "lab", field: ".."})
    (result,) = call_all([("memory_recall", {"session_id": "s"})], defaults)
    assert result.is_error
    assert result.content[0].text == (
        f"Error executing tool memory_recall: {field} cannot be '..': no id of this API is "
        "'.' or '..'"
    )


def test_an_empty_session_id_names_the_argument():
    args = {**REQUIRED["memory_add_messages"], **WHERE, "session_id": ""}
    (result,) = call_all([("memory_add_messages", args)])
    assert result.is_error
    assert result.content[0].text == (
        "Error executing tool memory_add_messages: session_id must be a non-empty string, not ''"
    )


@pytest.mark.parametrize(
    ("header", "argument"), [("x-kividb-store", "store"), ("x-kividb-instance", "instance_id")]
)
def test_the_remote_servers_default_headers_name_the_argument_they_stand_for(
    monkeypatch, header, argument
):
    monkeypatch.setenv(API_URL_ENV, NOWHERE)
    event = sample(
        body=json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "tools/call",
                "params": {"name": "memory_recall", "arguments": {"session_id": "s"}},
            }
        )
    )
    event["headers"].update({"x-kividb-instance": "local", "x-kividb-store": "lab", header: ".."})
    result = json.loads(FUNCTION.load()(event, None)["body"])["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"] == (
        f"Error executing tool memory_recall: {argument} cannot be '..': no id of this API is "
        "'.' or '..'"
    )
