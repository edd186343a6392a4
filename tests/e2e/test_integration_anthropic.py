"""Claude's memory tool on a store's keyed memories: the anthropic SDK's own tool runner
(``client.beta.messages.tool_runner``) against a loopback server speaking the Messages API,
whose scripted model uses all six commands, hostile paths included; the store is read
afterwards to check what was kept, and what was refused changed nothing."""

from __future__ import annotations

import asyncio
import itertools
import unicodedata
from typing import Any

import pytest
from anthropic import Anthropic, AsyncAnthropic
from anthropic.lib.tools import ToolError
from anthropic.types.beta import BetaMemoryTool20250818ViewCommand
from hypothesis import given, strategies as st

from kividb_memory import AsyncMemoryClient
from kividb_memory.integrations.anthropic import (
    AsyncKiviDBMemoryTool,
    KiviDBMemoryTool,
    memory_key,
)
from tests.support.model_servers import ScriptedChatServer

NAMESPACE = ("claude", "ann")
_ids = itertools.count(1)

# Each step: the model's tool calls, then what each tool result must be (text, is_error).
STEPS: list[tuple[list[dict[str, Any]], list[tuple[str, bool]]]] = [
    (
        [{"command": "view", "path": "/memories"}],
        [
            (
                "Here're the files and directories up to 2 levels deep in /memories, "
                "excluding hidden items:\n0B\t/memories",
                False,
            )
        ],
    ),
    (
        [
            {
                "command": "create",
                "path": "/memories/notes/prefs.md",
                "file_text": "Ann likes tea.\nLives in Porto.\n",
            },
            {"command": "create", "path": "/memories/café/日本.md", "file_text": "多謝\n"},
        ],
        [
            ("File created successfully at: /memories/notes/prefs.md", False),
            ("File created successfully at: /memories/café/日本.md", False),
        ],
    ),
    (
        [
            {
                "command": "str_replace",
                "path": "/memories/notes/prefs.md",
                "old_str": "likes tea",
                "new_str": "likes green tea",
            },
            {
                "command": "insert",
                "path": "/memories/notes/prefs.md",
                "insert_line": 1,
                "insert_text": "Works nights.\n",
            },
        ],
        [
            (
                "The memory file has been edited. Here is the snippet showing the change (with "
                "line numbers):\n     1\tAnn likes green tea.\n     2\tLives in Porto.\n     3\t",
                False,
            ),
            ("The file /memories/notes/prefs.md has been edited.", False),
        ],
    ),
    (
        [
            {"command": "view", "path": "/memories/notes/prefs.md"},
            {"command": "view", "path": "/memories"},
        ],
        [
            (
                "Here's the content of /memories/notes/prefs.md with line numbers:\n"
                "     1\tAnn likes green tea.\n     2\tWorks nights.\n     3\tLives in Porto.\n"
                "     4\t",
                False,
            ),
            (
                "Here're the files and directories up to 2 levels deep in /memories, "
                "excluding hidden items:\n58B\t/memories\n7B\t/memories/café/\n"
                "7B\t/memories/café/日本.md\n51B\t/memories/notes/\n"
                "51B\t/memories/notes/prefs.md",
                False,
            ),
        ],
    ),
    (
        [
            {"command": "rename", "old_path": "/memories/notes", "new_path": "/memories/profile"},
            {"command": "delete", "path": "/memories/café/日本.md"},
        ],
        [
            ("Successfully renamed /memories/notes to /memories/profile", False),
            ("Successfully deleted /memories/café/日本.md", False),
        ],
    ),
    (  # hostile paths: each refused with the reference implementation's words
        [
            {"command": "view", "path": "/memories/../../etc/passwd"},
            {"command": "create", "path": "/etc/cron.d/x", "file_text": "evil"},
            {"command": "create", "path": "/memories/a/../../b", "file_text": "evil"},
            {"command": "delete", "path": "/memories/.."},
            {"command": "rename", "old_path": "/memories/profile", "new_path": "/home/profile"},
            {"command": "create", "path": "/memories/invoice\u202efdp.exe", "file_text": "x"},
            {"command": "create", "path": "/memories/nul\x00.md", "file_text": "x"},
            {"command": "create", "path": "/memories/cafe\u0301.md", "file_text": "x"},
            {"command": "delete", "path": "/memories"},
            {"command": "create", "path": "/memories/profile/prefs.md", "file_text": "again"},
            {"command": "view", "path": "/memories/missing.md"},
        ],
        [
            ("Path /memories/../../etc/passwd would escape /memories directory", True),
            ("Path must start with /memories, got: /etc/cron.d/x", True),
            ("Path /memories/a/../../b would escape /memories directory", True),
            ("Path /memories/.. would escape /memories directory", True),
            ("Path must start with /memories, got: /home/profile", True),
            ("holds characters a memory path may not have", True),
            ("holds characters a memory path may not have", True),
            ("holds characters a memory path may not have", True),
            ("Cannot delete the /memories directory itself", True),
            ("File /memories/profile/prefs.md already exists", True),
            ("The path /memories/missing.md does not exist. Please provide a valid path.", True),
        ],
    ),
]


def _tool_use(inputs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": f"msg_{next(_ids)}",
        "type": "message",
        "role": "assistant",
        "model": "claude-scripted",
        "content": [
            {"type": "tool_use", "id": f"toolu_{next(_ids)}", "name": "memory", "input": i}
            for i in inputs
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def _results(request_body: dict[str, Any]) -> list[tuple[str, bool]]:
    last = request_body["messages"][-1]
    assert last["role"] == "user"
    found = []
    for block in last["content"]:
        content = block["content"]
        text = content if isinstance(content, str) else "".join(p["text"] for p in content)
        found.append((text, bool(block.get("is_error"))))
    return found


def _script(server: ScriptedChatServer) -> None:
    for inputs, _ in STEPS:
        server.reply_raw(_tool_use(inputs))
    server.reply("Noted.", finish="end_turn")


def _check(server: ScriptedChatServer) -> None:
    bodies = [r.body for r in server.requests]
    assert len(bodies) == len(STEPS) + 1
    assert bodies[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    for (_, expected), body in zip(STEPS, bodies[1:], strict=True):
        got = _results(body)
        assert len(got) == len(expected)
        for (text, is_error), (want, want_error) in zip(got, expected, strict=True):
            assert is_error == want_error, (text, want)
            assert (want in text) if want_error else (text == want), (text, want)


def test_the_sdks_tool_runner_uses_every_command_on_a_store(memory_store):
    tool = KiviDBMemoryTool(store=memory_store, namespace=NAMESPACE)
    with ScriptedChatServer("anthropic") as server:
        _script(server)
        client = Anthropic(api_key="sk-test", base_url=server.url.removesuffix("/v1"))
        runner = client.beta.messages.tool_runner(
            model="claude-scripted",
            max_tokens=1024,
            tools=[tool],
            messages=[{"role": "user", "content": "Remember what I like."}],
        )
        final = runner.until_done()
        _check(server)
    assert final.content[0].text == "Noted."  # type: ignore[union-attr]
    kept = memory_store.search_keyed_memories(("claude",), limit=100).items
    assert {(tuple(k.namespace), k.key): k.value for k in kept} == {
        (NAMESPACE, "profile/prefs.md"): {
            "content": "Ann likes green tea.\nWorks nights.\nLives in Porto.\n"
        }
    }


def test_the_async_runner_with_an_async_store(stack, memory_store):
    async def go() -> list[Any]:
        async with AsyncMemoryClient(stack.url, stack.api_key) as memory:
            store = memory.store(memory_store.instance_id, memory_store.name)
            tool = AsyncKiviDBMemoryTool(store=store, namespace=NAMESPACE)
            with ScriptedChatServer("anthropic") as server:
                _script(server)
                client = AsyncAnthropic(api_key="sk-test", base_url=server.url.removesuffix("/v1"))
                runner = client.beta.messages.tool_runner(
                    model="claude-scripted",
                    max_tokens=1024,
                    tools=[tool],
                    messages=[{"role": "user", "content": "Remember what I like."}],
                )
                await runner.until_done()
                _check(server)
            cleared = await tool.clear_all_memory()
            return [cleared, (await store.search_keyed_memories(("claude",))).items]

    assert asyncio.run(go()) == ["All memory cleared", []]


def test_namespaces_keep_two_users_apart_and_a_sync_tool_refuses_an_async_store(
    stack, memory_store
):
    ann = KiviDBMemoryTool(store=memory_store, namespace=("claude", "ann"))
    bob = KiviDBMemoryTool(store=memory_store, namespace=("claude", "bob"))
    ann.call({"command": "create", "path": "/memories/a.md", "file_text": "ann's"})
    with pytest.raises(ToolError, match="does not exist"):
        bob.call({"command": "view", "path": "/memories/a.md"})
    assert bob.view(BetaMemoryTool20250818ViewCommand(command="view", path="/memories")).endswith(
        "0B\t/memories"
    )
    with pytest.raises(TypeError, match="AsyncKiviDBMemoryTool"):
        KiviDBMemoryTool(
            store=AsyncMemoryClient(stack.url, stack.api_key).store("local", "x"),
            namespace=("claude",),
        )


@given(st.text(max_size=40))
def test_a_path_is_refused_or_becomes_a_key_inside_memories(suffix):
    path = "/memories/" + suffix
    try:
        key = memory_key(path)
    except ToolError:
        return
    parts = key.split("/") if key else []
    assert all(p not in ("", ".", "..") for p in parts)
    assert unicodedata.normalize("NFC", key) == key
    assert all(unicodedata.category(c)[0] != "C" for c in key)
