"""``kividb_memory.chat_export``'s reading of ChatGPT's message tree: whatever the tree (edits
and regenerations branch it anywhere), the conversation is the path from ``current_node`` back
to the root, in order; and the pages it sends stay within the import route's limits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings, strategies as st

from kividb_memory.chat_export import (
    MAX_CONTENT_CHARS,
    ChatConversation,
    ChatMessage,
    parse_chat_export,
    session_pages,
)


@st.composite
def trees(draw):
    """A ChatGPT conversation whose nodes n1..nN each hang under an earlier node (n0 the root),
    and the node on screen."""
    size = draw(st.integers(min_value=1, max_value=40))
    parents = [draw(st.integers(min_value=0, max_value=i - 1)) for i in range(1, size + 1)]
    mapping = {"n0": {"id": "n0", "parent": None, "children": [], "message": None}}
    for i, parent in enumerate(parents, start=1):
        role = "user" if i % 2 else "assistant"
        message = {
            "id": f"n{i}",
            "author": {"role": role},
            "create_time": 1_700_000_000 + i,
            "content": {"content_type": "text", "parts": [f"text {i}"]},
        }
        mapping[f"n{i}"] = {
            "id": f"n{i}",
            "parent": f"n{parent}",
            "children": [],
            "message": message,
        }
        mapping[f"n{parent}"]["children"].append(f"n{i}")
    current = draw(st.integers(min_value=0, max_value=size))
    return mapping, f"n{current}"


@given(trees())
@settings(max_examples=200, deadline=None)
def test_the_conversation_is_the_path_to_the_current_node(tree):
    mapping, current = tree
    export = [
        {
            "id": "c",
            "title": "t",
            "create_time": 1_700_000_000,
            "mapping": mapping,
            "current_node": current,
        }
    ]
    (conversation,) = parse_chat_export(export, "chatgpt")
    path, node = [], current
    while node != "n0":
        path.append(node)
        node = mapping[node]["parent"]
    assert [m.content for m in conversation.messages] == [f"text {n[1:]}" for n in reversed(path)]
    times = [m.created_at for m in conversation.messages]
    assert times == sorted(times)


@given(st.integers(min_value=1, max_value=650), st.booleans())
@settings(max_examples=30, deadline=None)
def test_pages_hold_at_most_200_messages_numbered_from_1(count, extract):
    start = datetime(2023, 5, 8, tzinfo=UTC)
    messages = [
        ChatMessage("user", "x" * MAX_CONTENT_CHARS, start + timedelta(seconds=i))
        for i in range(count)
    ]
    conversation = ChatConversation("chatgpt-c", "t", start, messages)
    pages = list(
        session_pages(conversation, "a", extract=extract, expires_at=start + timedelta(days=1))
    )
    assert all(len(p["messages"]) <= 200 for p in pages)
    assert [m["seq"] for p in pages for m in p["messages"]] == list(range(1, count + 1))
    assert {p["read_seq"] for p in pages} == {0 if extract else count}
    assert {p["message_count"] for p in pages} == {count}
