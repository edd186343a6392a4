"""The MCP server through the SDK's own client, over both transports, against the local stack.

- stdio: ``python -m kividb_memory.mcp`` as a child process (KIVIDB_API_URL at the stack);
- remote: Streamable HTTP at the stack's ``POST /mcp`` (the template's McpFunction).

Both go through a recording proxy in front of the stack. The stdio server calls the API through
it too, so a test can see the API requests a tool call made; the stack's McpFunction calls only
its own API (KIVIDB_MCP_API_URL, never the address the MCP request came to), so the tests that
look at those requests serve the remote transport with the same server class in process
(``RemoteServer(api_url=<the proxy>)``): the parity tests check that every argument of every
tool reaches the API, identically over both transports."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from kividb_memory import MemoryClient
from kividb_memory.mcp.remote import RemoteServer
from kividb_memory.mcp.tools import TOOL_ANSWER_BYTES, TOOL_NAMES
from tests.support.common import unique
from tests.support.stack import Stack, model_store

TRANSPORTS = ["stdio", "remote"]


@dataclass
class Recorded:
    method: str
    path: str
    query: str
    body: Any


@dataclass
class Proxy:
    """A loopback reverse proxy to the stack that records every API request (not ``/mcp``).

    It forwards the ``Host`` it was called on; the stack's remote server ignores it and calls
    the stack itself (so only the in-process ``RemoteServer(api_url=proxy.url)`` of
    ``recording_remote`` makes requests the proxy records)."""

    target: str
    records: list[Recorded] = field(default_factory=list)
    url: str = ""

    def serve(self) -> Iterator[Proxy]:
        proxy = self
        upstream = httpx.Client(base_url=self.target, timeout=60)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                path, _, query = self.path.partition("?")
                if path != "/mcp":
                    proxy.records.append(
                        Recorded(self.command, path, query, json.loads(body) if body else None)
                    )
                headers = {k: v for k, v in self.headers.items() if k.lower() != "content-length"}
                answer = upstream.request(self.command, self.path, content=body, headers=headers)
                self.send_response(answer.status_code)
                for name, value in answer.headers.items():
                    if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(name, value)
                self.send_header("content-length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()
            upstream.close()


@pytest.fixture(scope="module")
def proxy(open_stack: Stack) -> Iterator[Proxy]:
    yield from Proxy(open_stack.url).serve()


@pytest.fixture(scope="module")
def recording_remote(proxy: Proxy) -> RemoteServer:
    """The remote server (the class McpFunction serves) in process, calling the API through
    the recording proxy: the remote transport of the tests that look at the API requests."""
    return RemoteServer(api_url=proxy.url)


@pytest.fixture(scope="module")
def lab(open_stack: Stack, provider) -> Iterator[str]:
    """A store whose texts the scripted provider embeds (so memory_add needs no vector)."""
    with MemoryClient(open_stack.url, open_stack.api_key) as client:
        path = model_store(client, provider)
        yield path.rsplit("/", 1)[1]
        client.delete_store("local", path.rsplit("/", 1)[1])


@contextlib.asynccontextmanager
async def connect(
    transport: str,
    url: str,
    key: str,
    instance: str | None = None,
    store: str | None = None,
    app: RemoteServer | None = None,
) -> AsyncIterator[Client]:
    """An MCP session with the server over ``transport``, the API at ``url``: for ``remote``,
    the stack's ``POST /mcp`` at ``url``, or ``app`` in process when given."""
    if transport == "stdio":
        env = {"KIVIDB_API_URL": url, "KIVIDB_API_KEY": key}
        env.update({"KIVIDB_INSTANCE": instance} if instance else {})
        env.update({"KIVIDB_STORE": store} if store else {})
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "kividb_memory.mcp"], env=env
        )
        async with Client(params) as client:
            yield client
        return
    headers = {"Authorization": f"Bearer {key}"}
    headers.update({"X-KiviDB-Instance": instance} if instance else {})
    headers.update({"X-KiviDB-Store": store} if store else {})
    transport_of = {} if app is None else {"transport": httpx2.ASGITransport(app=app)}
    endpoint = f"{url}/mcp" if app is None else "http://mcp.test/mcp"
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60, **transport_of) as http,
        Client(streamable_http_client(endpoint, http_client=http)) as client,
    ):
        yield client


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def text(result: Any) -> str:
    return "".join(block.text for block in result.content)


# --- the tools -----------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_both_transports_list_the_six_tools_with_described_arguments_and_hints(
    proxy, open_stack, transport
):
    async def go():
        async with connect(transport, proxy.url, open_stack.api_key) as client:
            return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in run(go())}
    assert list(tools) == list(TOOL_NAMES)
    for tool in tools.values():
        assert tool.description and tool.input_schema["additionalProperties"] is False
        for name, schema in tool.input_schema["properties"].items():
            assert schema.get("description"), f"{tool.name}.{name} has no description"
    for name in ("list_memory_stores", "memory_recall", "memory_search"):
        assert tools[name].annotations.read_only_hint is True
    assert tools["memory_forget"].annotations.destructive_hint is True
    assert tools["memory_forget"].annotations.read_only_hint is False
    assert "with its whole chain" in tools["memory_forget"].description
    assert "deleted_ids" in tools["memory_forget"].output_schema["properties"]
    assert tools["memory_add_messages"].annotations.read_only_hint is False
    assert tools["memory_search"].input_schema["properties"]["mode"]["enum"] == [
        "semantic",
        "keyword",
        "hybrid",
    ]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_add_messages_recall_add_search_and_forget_a_memory(proxy, open_stack, lab, transport):
    session, actor = unique("chat"), unique("user")
    where = {"instance_id": "local", "store": lab}
    DEPLOYS = "We deploy to eu-west-1 on Fridays."

    async def go():
        async with connect(transport, proxy.url, open_stack.api_key) as client:
            added = await client.call_tool(
                "memory_add_messages",
                {
                    "session_id": session,
                    "actor_id": actor,
                    **where,
                    "messages": [
                        {"role": "user", "content": DEPLOYS, "name": "Ann"},
                        {"role": "assistant", "content": "Noted: eu-west-1, Fridays."},
                    ],
                },
            )
            recalled = await client.call_tool(
                "memory_recall", {"session_id": session, "query": "When do we deploy?", **where}
            )
            kept = await client.call_tool(
                "memory_add",
                {
                    "text": "Ann's on-call rotation starts on Mondays",
                    "actor_id": actor,
                    "type": "semantic",
                    "topics": ["on-call"],
                    **where,
                },
            )
            found = await client.call_tool(
                "memory_search",
                {"query": "on-call rotation", "mode": "keyword", "actor_id": actor, **where},
            )
            memory_id = kept.structured_content["id"]
            forgotten = await client.call_tool("memory_forget", {"memory_id": memory_id, **where})
            again = await client.call_tool(
                "memory_search",
                {"query": "on-call rotation", "mode": "keyword", "actor_id": actor, **where},
            )
            gone = await client.call_tool("memory_forget", {"memory_id": memory_id, **where})
            listed = await client.call_tool("list_memory_stores", {"instance_id": "local"})
            return added, recalled, kept, found, forgotten, again, gone, listed

    added, recalled, kept, found, forgotten, again, gone, listed = run(go())
    assert not added.is_error
    assert added.structured_content == {"session_id": session, "added": 2, "message_count": 2}
    assert not recalled.is_error
    context = text(recalled)
    assert context == recalled.structured_content["context"]
    assert '] user "Ann": "We deploy to eu-west-1 on Fridays."' in context
    assert [m["content"] for m in recalled.structured_content["messages"]] == [
        "We deploy to eu-west-1 on Fridays.",
        "Noted: eu-west-1, Fridays.",
    ]
    assert not kept.is_error and kept.structured_content["topics"] == ["on-call"]
    assert [m["id"] for m in found.structured_content["memories"]] == [
        kept.structured_content["id"]
    ]
    memory_id = kept.structured_content["id"]
    assert forgotten.structured_content == {
        "memory_id": memory_id,
        "deleted": True,
        "deleted_ids": [memory_id],
        "complete": True,
    }
    assert again.structured_content == {
        "memories": [],
        "memories_omitted": 0,
        "reranked": None,
        "time_window": None,
    }
    assert gone.is_error and "404 memory_not_found" in text(gone)
    assert lab in [s["name"] for s in listed.structured_content["stores"]]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_api_errors_and_bad_arguments_are_tool_errors_naming_the_problem(
    proxy, open_stack, lab, transport
):
    where = {"instance_id": "local", "store": lab}

    async def go(key: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
        async with connect(transport, proxy.url, key) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    unknown_store, bad_limit, unknown_arg, bad_role, bad_id, no_store, bad_memory = run(
        go(
            open_stack.api_key,
            [
                (
                    "memory_recall",
                    {"session_id": "s", "instance_id": "local", "store": unique("none")},
                ),
                ("memory_recall", {"session_id": "s", "limit": 0, **where}),
                ("memory_search", {"query": "x", "search_mode": "keyword", **where}),
                (
                    "memory_add_messages",
                    {"session_id": "s", "messages": [{"role": "robot", "content": "x"}], **where},
                ),
                ("memory_recall", {"session_id": "bad/id", **where}),
                ("memory_recall", {"session_id": "s"}),
                ("memory_forget", {"memory_id": "not-a-memory", **where}),
            ],
        )
    )
    assert all(r.is_error for r in (unknown_store, bad_limit, unknown_arg, bad_role, bad_id))
    assert "KiviDB API error 404 store_not_found: Store " in text(unknown_store)
    assert "limit\n  Input should be greater than or equal to 1" in text(bad_limit)
    assert "search_mode\n  Extra inputs are not permitted" in text(unknown_arg)
    assert "messages.0.role\n  Input should be 'user', 'assistant', 'system' or 'tool'" in text(
        bad_role
    )
    # the API's own 422, its field named as the tool's argument
    assert "KiviDB API error 422 validation_error" in text(bad_id) and "session_id:" in text(bad_id)
    # pattern errors in words, never the regular expression (issue 32)
    assert "letters, digits, '.', '_', ':', '@' and '-'" in text(bad_id)
    assert bad_memory.is_error and "must be a memory id: 'mem_' and 20 lower-case" in text(
        bad_memory
    )
    assert not any("^" in text(r) for r in (bad_id, bad_memory))
    assert no_store.is_error and "instance_id is required" in text(no_store)

    (wrong_key,) = run(
        go(
            "kvm_wrong_key_000000000000000000000000000",
            [
                ("memory_recall", {"session_id": "s", **where}),
            ],
        )
    )
    assert wrong_key.is_error
    assert text(wrong_key).endswith(
        "KiviDB API error 401 unauthorized: The API key is not valid or has been revoked."
    )


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_store_without_embeddings_says_to_search_by_keyword(proxy, open_stack, transport):
    # The README's own store (no embedding model): a search in the default mode needs a vector,
    # which no tool can send, so the tool error says what the assistant can do instead.
    name = unique("plain")
    with MemoryClient(open_stack.url, open_stack.api_key) as client:
        client.put_store("local", name)
        client.store("local", name).add_events("s", [{"role": "user", "content": "Hi"}])
        where = {"instance_id": "local", "store": name}

        async def go() -> list[Any]:
            async with connect(transport, proxy.url, open_stack.api_key) as mcp:
                return [
                    await mcp.call_tool("memory_search", {"query": "deploys", **where}),
                    await mcp.call_tool(
                        "memory_search", {"query": "x", "mode": "keyword", **where}
                    ),
                ]

        hybrid, keyword = run(go())
        client.delete_store("local", name)
    assert hybrid.is_error and "KiviDB API error 422 vector_required" in text(hybrid)
    assert "search it with mode 'keyword'" in text(hybrid)
    assert not keyword.is_error


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_forgetting_a_dot_segment_id_is_a_tool_error_and_the_store_stays(
    proxy, open_stack, lab, transport
):
    where = {"instance_id": "local", "store": lab}

    async def go() -> list[Any]:
        async with connect(transport, proxy.url, open_stack.api_key) as client:
            return [
                await client.call_tool("memory_forget", {"memory_id": dots, **where})
                for dots in (".", "..")
            ]

    for result in run(go()):
        assert result.is_error and "memory_id cannot be" in text(result)
    with open_stack.client() as api:
        assert api.get(f"/instances/local/agent-memory/{lab}").status_code == 200


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_dot_segment_store_or_instance_is_a_tool_error_naming_it(proxy, open_stack, transport):
    # Before: "Error executing tool memory_recall", and no reason.
    async def go() -> list[Any]:
        async with connect(transport, proxy.url, open_stack.api_key) as client:
            return [
                await client.call_tool("memory_recall", {"session_id": "s", **where})
                for where in (
                    {"instance_id": "local", "store": ".."},
                    {"instance_id": "..", "store": "x"},
                )
            ]

    store, instance = run(go())
    assert store.is_error and text(store) == (
        "Error executing tool memory_recall: store cannot be '..': no id of this API is '.' or '..'"
    )
    assert instance.is_error and text(instance).startswith(
        "Error executing tool memory_recall: instance_id cannot be '..'"
    )


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_forgetting_a_superseded_memory_forgets_its_chain_and_lists_every_id(
    proxy, open_stack, lab, transport
):
    # The API forgets a memory's whole chain. Before, the tool said it forgot the one memory
    # asked for, while the current version that replaced it went too.
    actor = unique("user")
    with MemoryClient(open_stack.url, open_stack.api_key) as api:
        memories = api.store("local", lab)
        first = memories.add_memory("Ann is vegetarian", actor_id=actor).id
        second = memories.add_memory("Ann eats fish now", actor_id=actor, supersedes=first).id
        third = memories.add_memory("Ann is vegan", actor_id=actor, supersedes=second).id
        other = memories.add_memory("Ann lives in Lyon", actor_id=actor).id

        async def go() -> Any:
            async with connect(transport, proxy.url, open_stack.api_key) as client:
                return await client.call_tool(
                    "memory_forget", {"memory_id": second, "instance_id": "local", "store": lab}
                )

        forgotten = run(go())
        listed = memories.list_memories(actor_id=actor, include_superseded=True)
    assert not forgotten.is_error, text(forgotten)
    assert forgotten.structured_content == {
        "memory_id": second,
        "deleted": True,
        "deleted_ids": [first, second, third],
        "complete": True,
    }
    assert [m.id for m in listed.memories] == [other]


def test_a_remote_tool_call_goes_to_the_stacks_own_api_whatever_the_host_header(open_stack):
    # Before: the API's address was the MCP request's URL less /mcp, so "Host: 127.0.0.1:<port>"
    # sent the tool call, with the caller's key, to any loopback port, and part of that
    # server's answer came back in the tool's result.
    seen: list[tuple[str, str | None]] = []

    class Attacker(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append((self.path, self.headers.get("authorization")))
            body = b'{"error": "stolen", "message": "the attacker answered"}'
            self.send_response(400)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    attacker = ThreadingHTTPServer(("127.0.0.1", 0), Attacker)
    threading.Thread(target=attacker.serve_forever, daemon=True).start()
    params = {"name": "list_memory_stores", "arguments": {"instance_id": "local"}}
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    try:
        with open_stack.client() as api:
            answers = [
                api.post("/mcp", json=call, headers={**headers, "Host": host})
                for host in (f"127.0.0.1:{attacker.server_address[1]}", "[abc]", "[::1")
            ]
    finally:
        attacker.shutdown()
        attacker.server_close()
    assert seen == []
    for answer in answers:  # "Host: [abc]" was a 500
        assert answer.status_code == 200, answer.text
        result = answer.json()["result"]
        assert result["isError"] is False, result
        assert [s["instance_id"] for s in result["structuredContent"]["stores"]] == (
            ["local"] * len(result["structuredContent"]["stores"])
        )


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_default_instance_and_store_let_the_tools_omit_them(
    proxy, recording_remote, open_stack, lab, transport
):
    session = unique("chat")

    async def go():
        async with connect(
            transport, proxy.url, open_stack.api_key, "local", lab, app=recording_remote
        ) as client:
            return await client.call_tool("memory_recall", {"session_id": session})

    proxy.records.clear()
    recalled = run(go())
    assert not recalled.is_error
    assert [r.path for r in proxy.records] == [f"/instances/local/agent-memory/{lab}/recall"]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("instance_id", ["local", None])
def test_list_memory_stores_pages_and_its_next_cursor_reaches_every_store_once(
    proxy, open_stack, transport, instance_id
):
    """A page of the listing says how to get the rest (issue 32: the tool answered the first
    page of 1,000 and said nothing of more); walked two at a time it names each store once."""
    names = [unique("paged") for _ in range(3)]
    where = {"instance_id": instance_id} if instance_id else {}

    async def walk() -> list[dict[str, Any]]:
        pages = []
        async with connect(transport, proxy.url, open_stack.api_key) as client:
            cursor = None
            for _ in range(1000):
                args = {**where, "limit": 2, **({"cursor": cursor} if cursor else {})}
                listed = await client.call_tool("list_memory_stores", args)
                assert not listed.is_error, text(listed)
                pages.append(listed.structured_content)
                cursor = listed.structured_content["next_cursor"]
                if cursor is None:
                    return pages
        raise AssertionError("the listing never ended")

    with MemoryClient(open_stack.url, open_stack.api_key) as client:
        for name in names:
            client.put_store("local", name, dimensions=3)
        try:
            pages = run(walk())
        finally:
            for name in names:
                client.delete_store("local", name)
    listed = [(s["instance_id"], s["name"]) for page in pages for s in page["stores"]]
    assert len(pages) >= 2 and all(len(page["stores"]) <= 2 for page in pages)
    assert len(listed) == len(set(listed))
    assert {("local", name) for name in names} <= set(listed)


def test_an_mcp_server_that_cannot_reach_the_api_answers_a_tool_error(open_stack):
    async def go():
        async with connect("stdio", "http://127.0.0.1:9", open_stack.api_key) as client:
            return await client.call_tool("list_memory_stores", {})

    result = run(go())
    assert result.is_error and "could not connect" in text(result)


def test_the_stdio_server_without_a_key_says_so_and_exits_2():
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "kividb_memory.mcp"],
        env={"KIVIDB_API_URL": "http://127.0.0.1:9", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        input="",
    )
    assert done.returncode == 2
    assert done.stderr == "kividb_memory.mcp: no API key: pass api_key= or set KIVIDB_API_KEY\n"
    assert done.stdout == ""


# --- parity: the same tools, every argument on the wire ----------------------------------------


def test_both_transports_list_the_same_tools_with_the_same_schemas(proxy, open_stack):
    async def tools(transport: str) -> list[dict[str, Any]]:
        async with connect(transport, proxy.url, open_stack.api_key) as client:
            listed = (await client.list_tools()).tools
            return [t.model_dump(mode="json", exclude_none=True) for t in listed]

    stdio, remote = run(tools("stdio")), run(tools("remote"))
    assert stdio == remote
    assert [t["name"] for t in stdio] == list(TOOL_NAMES)


def _calls(lab: str, memory_id: str, cursor: str) -> list[tuple[str, dict[str, Any], Any]]:
    """Each tool with every argument it has set to a value of its own, and the API request
    that call must make, exactly (memory_forget: the two, reading the chain first).
    ``cursor``: a next_cursor of the instance's store listing."""
    s = f"/instances/local/agent-memory/{lab}"
    where = {"instance_id": "local", "store": lab}
    return [
        (
            "list_memory_stores",
            {"instance_id": "local", "cursor": cursor, "limit": 1},
            Recorded(
                "GET",
                "/instances/local/agent-memory",
                str(httpx.QueryParams({"cursor": cursor, "limit": 1})),
                None,
            ),
        ),
        (
            "memory_add_messages",
            {
                "session_id": "parity-1",
                "actor_id": "actor-p",
                "messages": [{"role": "user", "content": "c-1", "name": "n-1"}],
                **where,
            },
            Recorded(
                "POST",
                f"{s}/sessions/parity-1/events",
                "",
                {
                    "actor_id": "actor-p",
                    "events": [{"role": "user", "content": "c-1", "name": "n-1"}],
                },
            ),
        ),
        (
            "memory_recall",
            {"session_id": "parity-1", "query": "q-2", "actor_id": "actor-p", "limit": 7, **where},
            Recorded(
                "POST",
                f"{s}/recall",
                "",
                {
                    "session_id": "parity-1",
                    "query": "q-2",
                    "actor_id": "actor-p",
                    "limit": 7,
                    "max_bytes": TOOL_ANSWER_BYTES,
                },
            ),
        ),
        (
            "memory_search",
            {
                "query": "q-3",
                "mode": "keyword",
                "actor_id": "actor-p",
                "types": ["episodic"],
                "limit": 3,
                "min_score": 0.25,
                "time_filter": True,
                **where,
            },
            Recorded(
                "POST",
                f"{s}/memories/search",
                "",
                {
                    "query": "q-3",
                    "mode": "keyword",
                    "actor_id": "actor-p",
                    "types": ["episodic"],
                    "limit": 3,
                    "min_score": 0.25,
                    "time_filter": True,
                },
            ),
        ),
        (
            "memory_add",
            {
                "text": "t-4 likes tea",
                "actor_id": "actor-p",
                "type": "episodic",
                "topics": ["tea"],
                **where,
            },
            Recorded(
                "POST",
                f"{s}/memories",
                "",
                {
                    "text": "t-4 likes tea",
                    "actor_id": "actor-p",
                    "type": "episodic",
                    "topics": ["tea"],
                },
            ),
        ),
        (
            "memory_forget",
            {"memory_id": memory_id, **where},
            [
                Recorded("GET", f"{s}/memories/{memory_id}", "", None),
                Recorded("DELETE", f"{s}/memories/{memory_id}", "", None),
            ],
        ),
    ]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_every_argument_of_every_tool_reaches_the_api(
    proxy, recording_remote, open_stack, lab, transport
):
    with MemoryClient(open_stack.url, open_stack.api_key) as client:
        memory_id = client.store("local", lab).add_memory(f"parity {unique('m')}").id
        second = unique("second")
        client.put_store("local", second, dimensions=3)  # so that a page of 1 has a next one
        cursor = client.list_stores("local", limit=1).next_cursor
        assert cursor is not None

    async def go():
        async with connect(
            transport, proxy.url, open_stack.api_key, app=recording_remote
        ) as client:
            schemas = {t.name: t.input_schema for t in (await client.list_tools()).tools}
            made = []
            for name, args, expected in _calls(lab, memory_id, cursor):
                assert set(args) == set(schemas[name]["properties"]), f"{name}: cover every arg"
                proxy.records.clear()
                result = await client.call_tool(name, args)
                assert not result.is_error, text(result)
                made.append((name, list(proxy.records), expected))
            return made

    try:
        made = run(go())
    finally:
        with MemoryClient(open_stack.url, open_stack.api_key) as client:
            client.delete_store("local", second)
    for name, records, expected in made:
        assert records == (expected if isinstance(expected, list) else [expected]), name


def test_concurrent_remote_calls_beyond_the_workers_all_complete(proxy, open_stack, lab):
    """The local stack has 2 workers; each remote tool call calls the stack back. 12 at once
    complete (none waits for a worker that waits for it)."""

    async def one(i: int) -> bool:
        async with connect("remote", open_stack.url, open_stack.api_key) as client:
            result = await client.call_tool(
                "memory_recall", {"session_id": f"c-{i}", "instance_id": "local", "store": lab}
            )
            return result.is_error

    async def go():
        return await asyncio.gather(*(one(i) for i in range(12)))

    started = time.monotonic()
    assert run(go()) == [False] * 12
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_recall_carries_the_actors_profile_on_both_transports(open_stack, provider, transport):
    with MemoryClient(open_stack.url, open_stack.api_key) as api:
        fields = [{"name": "city", "description": "Where the user lives"}]
        path = model_store(api, provider, profile_fields=fields)
        name = path.rsplit("/", 1)[1]
        try:
            actor = unique("user")
            api.store("local", name).update_profile(actor, {"city": "Porto"})

            async def go():
                async with connect(transport, open_stack.url, open_stack.api_key) as client:
                    arguments = {"session_id": unique("s"), "actor_id": actor}
                    arguments.update({"instance_id": "local", "store": name})
                    return await client.call_tool("memory_recall", arguments)

            recalled = run(go())
            assert not recalled.is_error, text(recalled)
            assert recalled.structured_content["profile"] == {"city": "Porto"}
            assert '## About the user\n- city: "Porto"' in text(recalled)
        finally:
            api.delete_store("local", name)
