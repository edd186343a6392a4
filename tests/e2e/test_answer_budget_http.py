"""Answers that fit Lambda, through the local stack (which fails any answer over Lambda's 6 MB
as AWS would): a session of 40 messages, each within the content limit, that would make a
20 MB recall; a store of memories whose search and listing would pass 5 MB. Each answer stays
under the budget, says what it left out, and the client reads the rest."""

from __future__ import annotations

import json

import pytest

from agent_memory.answers import DEFAULT_ANSWER_BUDGET
from agent_memory.memories.models import MAX_MEMORY_CHARS
from agent_memory.models import MAX_MESSAGE_CHARS
from tests.support.common import unique
from tests.support.http import BASE

# A control character takes 6 bytes in JSON ("\u0001") and more in recall's context (quoted,
# then escaped again): the texts that weigh the most for their length.
HEAVY = "\u0001"
MESSAGES = 40


def carried(response) -> int:
    """The bytes of the answer's body as Lambda carries it (written once more as JSON)."""
    return len(json.dumps(response.text, ensure_ascii=False).encode("utf-8"))


@pytest.fixture
def heavy_session(memory, api):
    name = unique("store")
    memory.put_store("local", name, dimensions=3)
    handle = memory.store("local", name)
    for first in range(0, MESSAGES, 5):
        handle.add_events(
            "big",
            [
                {"role": "user", "content": f"{i:02d}" + HEAVY * (MAX_MESSAGE_CHARS - 2)}
                for i in range(first + 1, first + 6)
            ],
            actor_id="ann",
        )
    yield f"{BASE}/{name}", handle
    memory.delete_store("local", name)


def test_recall_of_a_session_over_the_limit_leaves_out_the_oldest_messages(api, heavy_session):
    path, _ = heavy_session
    response = api.post(f"{path}/recall", json={"session_id": "big"})
    assert response.status_code == 200, response.text
    assert carried(response) <= DEFAULT_ANSWER_BUDGET
    answer = response.json()
    kept = [m["seq"] for m in answer["messages"]]
    assert 0 < len(kept) < MESSAGES and answer["messages_omitted"] == MESSAGES - len(kept)
    assert kept == list(range(MESSAGES - len(kept) + 1, MESSAGES + 1))  # the newest, in order
    assert (
        f"({answer['messages_omitted']} earlier messages of the conversation left out"
        in (answer["context"])
    )
    smaller = api.post(f"{path}/recall", json={"session_id": "big", "max_bytes": 1_048_576})
    assert carried(smaller) <= 1_048_576 and smaller.json()["messages_omitted"] > len(kept)


def test_a_session_read_pages_back_by_bytes_to_every_message(api, heavy_session):
    path, handle = heavy_session
    first = api.get(f"{path}/sessions/big", params={"recent": 1000})
    assert first.status_code == 200 and carried(first) <= DEFAULT_ANSWER_BUDGET
    assert first.json()["messages_omitted"] > 0
    seen: list[int] = []
    before = None
    while True:
        page = handle.get_session("big", recent=1000, before_seq=before)
        seen = [m.seq for m in page.messages] + seen
        assert all(m.content.startswith(f"{m.seq:02d}") for m in page.messages)
        if not page.messages_omitted:
            break
        before = page.messages[0].seq
    assert seen == list(range(1, MESSAGES + 1))


def test_search_and_listing_over_the_budget_leave_out_the_lowest_and_page_on(memory, api):
    name = unique("store")
    dims = 100
    memory.put_store("local", name, dimensions=dims)
    path = f"{BASE}/{name}"
    try:
        handle = memory.store("local", name)
        for i in range(100):
            vector = [0.0] * dims
            vector[i] = 1.0
            handle.add_memory(
                f"tea {i:03d} " + HEAVY * (MAX_MEMORY_CHARS - 8), "ann", vector=vector
            )
        found = api.post(
            f"{path}/memories/search", json={"query": "tea", "mode": "keyword", "limit": 100}
        )
        assert found.status_code == 200 and carried(found) <= DEFAULT_ANSWER_BUDGET
        answer = found.json()
        assert answer["memories_omitted"] > 0
        assert len(answer["memories"]) + answer["memories_omitted"] == 100

        listed: list[str] = []
        offset: int | None = 0
        while offset is not None:
            page = api.get(f"{path}/memories", params={"limit": 100, "offset": offset})
            assert page.status_code == 200 and carried(page) <= DEFAULT_ANSWER_BUDGET
            listed += [m["id"] for m in page.json()["memories"]]
            offset = page.json()["next_offset"]
        assert len(listed) == len(set(listed)) == 100
        assert len(api.get(f"{path}/memories", params={"limit": 100}).json()["memories"]) < 100
    finally:
        memory.delete_store("local", name)
