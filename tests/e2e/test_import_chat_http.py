"""``python -m tools.transfer import-chat`` against the local stack, on ChatGPT and Claude exports
built from real LoCoMo conversations (``tests.support.chat_exports``) and on malformed ones: the
sessions a user would look at afterwards (their actor, messages, times, extraction armed or
not), the dry run, the output when piped, and the error naming the first malformed conversation
with nothing written."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import struct
import subprocess
import sys
import termios
from collections.abc import Iterator
from datetime import datetime

import pytest

from kividb_memory import MemoryClient, NotFoundError, StoreClient
from tests.support.chat_exports import (
    ABANDONED,
    chatgpt_export,
    claude_export,
    locomo_sessions,
    malformed,
)
from tests.support.common import ROOT, needs_data, unique
from tests.support.stack import Stack
from tools.scripted_model import ScriptedServer

pytestmark = needs_data


@pytest.fixture
def model_store(memory: MemoryClient, provider: ScriptedServer) -> Iterator[StoreClient]:
    """A store with a (scripted) language model, so that an import can arm extraction."""
    name = unique("chat")
    memory.put_store(
        "local",
        name,
        llm_provider="custom",
        llm_model="scripted",
        llm_base_url=provider.url,
        dimensions=3,
        extraction_delay_seconds=600,
    )
    yield memory.store("local", name)
    with contextlib.suppress(NotFoundError):
        memory.delete_store("local", name)


def run_tool(stack: Stack, store: StoreClient, *args: str) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it, its output piped (not a terminal)."""
    command = [sys.executable, "-m", "tools.transfer", "import-chat", "--url", stack.url]
    command += ["--instance", "local", "--store", store.name, *args]
    env = {"KIVIDB_API_KEY": stack.api_key, "PATH": "/usr/bin:/bin"}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_a_chatgpt_export_becomes_sessions_of_the_actor_with_their_times(
    stack: Stack, model_store: StoreClient, tmp_path
):
    sessions = locomo_sessions(count=3)
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(chatgpt_export(sessions)))
    done = run_tool(
        stack, model_store, "--in", str(path), "--from", "chatgpt", "--actor", "caroline"
    )
    assert done.returncode == 0, done.stderr
    turns = sum(len(s["turns"]) for s in sessions)
    # piped: one line per stage, no progress bar
    lines = done.stdout.splitlines()
    assert lines[0] == f"read 3 conversations ({turns + 6} messages) from {path}"
    assert lines[1].startswith(f"imported 3 sessions ({turns + 6} messages, {turns + 6} new) into")
    stages = done.stderr.splitlines()
    assert stages[0] == "importing 3 conversations as actor caroline (extraction armed)"
    assert stages[1].startswith("import-chat: conversations: 3/3 (100%) in ")
    assert "\r" not in done.stderr
    for session in sessions:
        view = model_store.get_session(f"chatgpt-{session['id']}-gpt", recent=1000)
        assert view.actor_id == "caroline"
        # the branch on screen, in order: the turns, the tool's output, the photo; never the edit
        expected = [(role, text) for role, text, _ in session["turns"]]
        expected += [("tool", "42"), ("user", "[image]\nand this photo")]
        assert [(m.role, m.content) for m in view.messages] == expected
        assert ABANDONED not in json.dumps([m.content for m in view.messages])
        assert view.messages[-2].name == "python"
        assert view.messages[0].item == {"source": "chatgpt", "id": "m0", "content_type": "text"}
        for message, (_, _, at) in zip(view.messages, session["turns"], strict=False):
            assert message.created_at == at
        assert view.created_at == session["start"]
        assert view.extraction.unread == len(expected)
        assert view.extraction.due_at is not None  # armed, as after an append
    again = run_tool(
        stack, model_store, "--in", str(path), "--from", "chatgpt", "--actor", "caroline"
    )
    assert again.returncode == 0 and ", 0 new)" in again.stdout, again.stdout


def test_a_claude_export_with_no_extract_is_working_memory_only(
    stack: Stack, model_store: StoreClient, tmp_path
):
    sessions = locomo_sessions("conv-30", count=2)
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(claude_export(sessions)))
    args = ["--in", str(path), "--from", "claude", "--actor", "jon", "--no-extract"]
    done = run_tool(stack, model_store, *args)
    assert done.returncode == 0, done.stderr
    assert "(kept as working memory only)" in done.stdout
    for session in sessions:
        view = model_store.get_session(f"claude-{session['id']}-claude", recent=1000)
        assert view.actor_id == "jon"
        contents = [m.content for m in view.messages]
        assert contents[:-1] == [text for _, text, _ in session["turns"]]
        assert [m.role for m in view.messages[:2]] == [r for r, _, _ in session["turns"][:2]]
        tool = view.messages[-1]
        assert tool.role == "assistant"
        assert tool.content.startswith("Let me look that up.\n[tool web_search:")
        assert "[file: notes.txt]" in tool.content and "private notes" not in tool.content
        assert tool.item["tools"][0] == {
            "type": "tool_use",
            "name": "web_search",
            "input": {"query": "LGBTQ support group"},
        }
        assert view.messages[0].created_at == session["turns"][0][2]
        assert view.extraction.unread == 0 and view.extraction.due_at is None


def test_a_dry_run_prints_what_would_be_made_and_writes_nothing(
    stack: Stack, memory_store: StoreClient, tmp_path
):
    sessions = locomo_sessions(count=2)
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(chatgpt_export(sessions)))
    args = ["--in", str(path), "--from", "chatgpt", "--actor", "caroline", "--dry-run"]
    done = run_tool(stack, memory_store, *args)
    assert done.returncode == 0, done.stderr
    first = sessions[0]["turns"][0][2].isoformat(timespec="seconds")
    assert f"  chatgpt-conv-26-s1-gpt: {len(sessions[0]['turns']) + 2} messages, {first} to" in (
        done.stdout
    )
    assert "('LoCoMo conv-26-s1')" in done.stdout
    assert "would make 2 sessions" in done.stdout and "nothing was written" in done.stdout
    assert memory_store.list_sessions().sessions == []


@pytest.mark.parametrize(
    ("source", "how", "problem"),
    [
        ("chatgpt", "no mapping", "its mapping is missing or empty"),
        ("chatgpt", "missing node", "node 'nowhere' of its branch is not in its mapping"),
        ("chatgpt", "loop", "its message tree loops"),
        ("chatgpt", "role", "message 'm0' has the role 'critic'"),
        ("chatgpt", "time", "its create_time is 'yesterday', not a time in epoch seconds"),
        ("claude", "sender", "has the sender 'robot'"),
        ("claude", "time", "created_at 'yesterday' is not an ISO 8601 time"),
        ("claude", "messages", "its chat_messages is missing or not a list"),
        ("claude", "no id", "its id is '', not a non-empty string"),
    ],
)
def test_a_malformed_conversation_is_named_and_nothing_is_written(
    stack: Stack, memory_store: StoreClient, tmp_path, source, how, problem
):
    sessions = locomo_sessions(count=3)
    export = chatgpt_export(sessions) if source == "chatgpt" else claude_export(sessions)
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(malformed(export, source, how)))
    done = run_tool(stack, memory_store, "--in", str(path), "--from", source, "--actor", "a")
    assert done.returncode == 1
    assert "conversation 2 (id " in done.stderr and "LoCoMo conv-26-s2" in done.stderr, done.stderr
    assert problem in done.stderr, done.stderr
    assert "nothing was imported" in done.stderr
    assert memory_store.list_sessions().sessions == []  # not even the first, well-formed one


def test_files_that_are_not_an_export_are_refused_in_words(
    stack: Stack, memory_store: StoreClient, tmp_path
):
    path = tmp_path / "conversations.json"
    path.write_text('{"conversations": []}')
    done = run_tool(stack, memory_store, "--in", str(path), "--from", "claude", "--actor", "a")
    assert done.returncode == 1 and "is a JSON array of conversations, not dict" in done.stderr
    path.write_text("[{")
    done = run_tool(stack, memory_store, "--in", str(path), "--from", "claude", "--actor", "a")
    assert done.returncode == 1 and "is not JSON" in done.stderr
    missing = tmp_path / "none.json"
    done = run_tool(stack, memory_store, "--in", str(missing), "--from", "claude", "--actor", "a")
    assert done.returncode == 1 and "No such file" in done.stderr


def test_times_are_kept_to_the_millisecond(stack: Stack, memory_store: StoreClient, tmp_path):
    """ChatGPT's float epoch seconds keep their fraction (the API keeps milliseconds)."""
    sessions = locomo_sessions(count=1)
    export = chatgpt_export(sessions)
    export[0]["mapping"]["m0"]["message"]["create_time"] = 1683554160.125
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(export))
    done = run_tool(stack, memory_store, "--in", str(path), "--from", "chatgpt", "--actor", "c")
    assert done.returncode == 0, done.stderr
    view = memory_store.get_session("chatgpt-conv-26-s1-gpt", recent=3)
    first = memory_store.export_session("chatgpt-conv-26-s1-gpt", limit=1).messages[0]
    assert first.created_at == datetime.fromisoformat("2023-05-08T13:56:00.125+00:00")
    assert view.message_count == len(sessions[0]["turns"]) + 2


def test_on_a_terminal_the_import_shows_a_progress_bar(
    stack: Stack, memory_store: StoreClient, tmp_path
):
    """With its error stream a terminal (a pseudo-terminal here), tqdm draws the bar there."""
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(claude_export(locomo_sessions(count=2))))
    main, follower = os.openpty()
    # a terminal of 100 columns (a new pseudo-terminal has 0, and tqdm draws no bar in 0)
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    command = [sys.executable, "-m", "tools.transfer", "import-chat", "--url", stack.url]
    command += ["--instance", "local", "--store", memory_store.name, "--in", str(path)]
    command += ["--from", "claude", "--actor", "a"]
    env = {"KIVIDB_API_KEY": stack.api_key, "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=follower, text=True, timeout=300
    )
    os.close(follower)
    seen = b""
    with contextlib.suppress(OSError):
        while chunk := os.read(main, 65536):
            seen += chunk
    os.close(main)
    assert done.returncode == 0
    assert b"2/2" in seen and b"conv" in seen and b"100%" in seen, seen
    assert "importing" not in done.stdout  # progress goes to the terminal, not stdout
    assert len(memory_store.list_sessions().sessions) == 2
