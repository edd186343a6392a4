"""The answer budget (``agent_memory.answers``): the largest item of each kind fits the least
budget, the largest answers that are never cut fit Lambda, and what is cut is cut from the
right end, as little as needed."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings, strategies as st

from agent_memory.answers import (
    LAMBDA_PAYLOAD_LIMIT,
    MIN_ANSWER_BYTES,
    largest_fitting,
    wire_bytes,
)
from agent_memory.memories.models import (
    MAX_MEMORY_CHARS,
    MAX_METADATA_BYTES,
    MAX_TOPIC_CHARS,
    MAX_TOPICS,
    MAX_VERSIONS,
    MemoryLink,
    MemoryList,
    MemoryVersion,
    MemoryView,
)
from agent_memory.memories.reads import MAX_CHAIN_SHOWN
from agent_memory.memories.recall import fitted_recall
from agent_memory.memories.reranking import Found
from agent_memory.memories.service import fitted_memory
from agent_memory.models import MAX_MESSAGE_CHARS
from agent_memory.sessions.models import Message

WHEN = datetime(2026, 12, 1, tzinfo=UTC)
HEAVY = "\u0001"  # 6 bytes in JSON, 7 as Lambda carries it: the heaviest character for its length
HEAVY_METADATA = {"k": HEAVY * ((MAX_METADATA_BYTES - 10) // 6)}  # 4,096 bytes of compact JSON


def heaviest_memory(n: int = 0, **fields) -> MemoryView:
    return MemoryView(
        id=f"mem_{n:020x}",
        text=HEAVY * MAX_MEMORY_CHARS,
        type="x" * 40,
        actor_id="a" * 128,
        topics=[HEAVY * MAX_TOPIC_CHARS] * MAX_TOPICS,
        metadata=HEAVY_METADATA,
        importance=0.5,
        confidence=0.5,
        created_at=WHEN,
        updated_at=WHEN,
        expires_at=WHEN,
        source=None,
        valid_from=WHEN,
        score=0.5,
        **fields,
    )


def message(seq: int, chars: int = MAX_MESSAGE_CHARS) -> Message:
    return Message(
        seq=seq,
        role="assistant",
        content=HEAVY * chars,
        name="n" * 128,
        created_at=WHEN + timedelta(seconds=seq),
    )


def test_the_metadata_used_here_is_the_largest_allowed():
    assert len(json.dumps(HEAVY_METADATA, separators=(",", ":"))) <= MAX_METADATA_BYTES


def test_one_item_of_each_list_fits_the_least_budget_with_room():
    assert wire_bytes(MemoryList(memories=[heaviest_memory()], next_offset=1, total=1)) < 80_000
    one = fitted_recall("s", "a", HEAVY * 8_000, [message(1)], Found([heaviest_memory()]), 10**9)
    assert wire_bytes(one) < MIN_ANSWER_BYTES * 3 // 4


def test_the_largest_memory_with_versions_and_chain_fits_any_budget_once_cut():
    version = MemoryVersion(
        text=HEAVY * MAX_MEMORY_CHARS,
        type="x" * 40,
        topics=[HEAVY * MAX_TOPIC_CHARS] * MAX_TOPICS,
        metadata=HEAVY_METADATA,
        importance=None,
        changed_at=WHEN,
    )
    chain = [
        MemoryLink(
            id=f"mem_{n:020x}", text=HEAVY * MAX_MEMORY_CHARS, valid_from=WHEN, valid_until=None
        )
        for n in range(2 * MAX_CHAIN_SHOWN + 1)
    ]
    whole = heaviest_memory(MAX_CHAIN_SHOWN, versions=[version] * MAX_VERSIONS, chain=chain)
    assert wire_bytes(whole) > LAMBDA_PAYLOAD_LIMIT  # what GET would have answered
    for budget in (MIN_ANSWER_BYTES, 5_000_000):
        fitted = fitted_memory(whole, budget)
        assert wire_bytes(fitted) <= budget
        shown = [link.id for link in fitted.chain or []]
        assert whole.id in shown and fitted.chain_omitted == len(chain) - len(shown)
        assert shown == sorted(shown)  # a window of the chain around the memory, in order
        kept = len(fitted.versions or [])
        assert fitted.versions == whole.versions[:kept]  # the newest versions
        assert fitted.versions_omitted == MAX_VERSIONS - kept
    assert fitted_memory(whole, 10**9).chain_omitted == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 400), min_size=0, max_size=30), st.integers(2_000, 40_000))
def test_largest_fitting_keeps_the_most_that_fit(sizes, budget):
    def build(kept: int) -> MemoryList:
        return MemoryList(
            memories=[
                heaviest_memory(n).model_copy(update={"text": "t" * size})
                for n, size in enumerate(sizes[:kept])
            ],
            next_offset=None,
            total=len(sizes),
        )

    view, kept = largest_fitting(build, len(sizes), budget)
    assert view == build(kept)
    if kept:
        assert wire_bytes(view) <= budget
    if kept < len(sizes):
        assert wire_bytes(build(kept + 1)) > budget


def test_recall_leaves_out_the_oldest_messages_then_the_lowest_memories():
    messages = [message(seq, 20_000) for seq in range(1, 31)]
    memories = [heaviest_memory(n) for n in range(10)]
    cut = fitted_recall("s", "a", None, messages, Found(list(memories)), 2_000_000)
    assert wire_bytes(cut) <= 2_000_000 and cut.memories == memories
    assert [m.seq for m in cut.messages] == list(range(31 - len(cut.messages), 31))
    assert cut.messages_omitted == 30 - len(cut.messages) > 0 and cut.memories_omitted == 0
    bare = fitted_recall("s", "a", None, messages, Found(list(memories) * 4), MIN_ANSWER_BYTES)
    assert bare.messages == [] and bare.messages_omitted == 30
    assert bare.memories == (memories * 4)[: len(bare.memories)] and bare.memories_omitted > 0
    assert wire_bytes(bare) <= MIN_ANSWER_BYTES
