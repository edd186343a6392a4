"""Time in the query over HTTP: a search or recall whose query names a time ("in May 2023",
"last week") ranks the memories that happened then higher, says which window it read, and
with ``time_filter`` keeps only them; a query naming no time is ranked as before."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from kividb_memory import MemoryClient, StoreClient, ValidationError
from tests.support.common import unique


def _at(cosine: float, side: int = 1) -> list[float]:
    """A unit vector at ``cosine`` from ``QUERY_VECTOR``, leaning on axis ``side`` (1 or 2)."""
    vector = [cosine, 0.0, 0.0]
    vector[side] = math.sqrt(1 - cosine * cosine)
    return vector


# Ten summer trips of one actor, from right on the query vector to far from it, and two older
# ones in the middle of that range: the time a query names must lift those.
MEMORIES = [
    *(
        (f"Alice went hiking, trip {i}", _at(1.0 - 0.05 * i), f"2023-07-{i + 1:02d}T10:00:00Z")
        for i in range(10)
    ),
    ("Alice went hiking in Wales", _at(0.83, 2), "2023-05-14T10:00:00Z"),
    ("Alice went hiking with Bob", _at(0.78, 2), "2022-05-20T10:00:00Z"),
]
QUERY_VECTOR = [1.0, 0.0, 0.0]


@pytest.fixture
def store(memory: MemoryClient) -> Iterator[StoreClient]:
    name = unique("time")
    memory.put_store("local", name, dimensions=3, dedupe_threshold=1.0)  # near trips are kept
    store = memory.store("local", name)
    for text, vector, occurred in MEMORIES:
        store.add_memory(text, actor_id="alice", vector=vector, occurred_at=occurred)
    yield store
    memory.delete_store("local", name)


def texts(found) -> list[str]:
    return [m.text for m in found.memories]


@pytest.mark.parametrize("mode", ["semantic", "hybrid", "keyword"])
def test_a_memory_of_the_time_the_query_names_ranks_first(store, mode):
    vector = QUERY_VECTOR if mode != "keyword" else None
    found = store.search(
        "Where did Alice go hiking in May 2023?",
        mode=mode,
        actor_id="alice",
        query_vector=vector,
        limit=2,
    )
    assert texts(found)[0] == "Alice went hiking in Wales"
    window = found.time_window
    assert window is not None and window.said == "May 2023"
    assert (window.start.isoformat(), window.end.isoformat()) == (
        "2023-05-01T00:00:00+00:00",
        "2023-06-01T00:00:00+00:00",
    )


def test_a_query_naming_no_time_keeps_the_order_of_its_measures(store):
    found = store.search(
        "Where did Alice go hiking?",
        mode="semantic",
        actor_id="alice",
        query_vector=QUERY_VECTOR,
        limit=12,
    )
    assert found.time_window is None
    by_cosine = sorted(MEMORIES, key=lambda m: -m[1][0])
    assert texts(found) == [t for t, _, _ in by_cosine]


def test_time_filter_keeps_only_the_memories_of_that_time(store):
    found = store.search(
        "hiking in 2023",
        mode="semantic",
        actor_id="alice",
        query_vector=QUERY_VECTOR,
        limit=20,
        time_filter=True,
    )
    assert sorted(texts(found)) == sorted(t for t, _, o in MEMORIES if o.startswith("2023"))


def test_relative_times_are_read_against_reference_time(store):
    found = store.search(
        "Where did Alice hike last month?",
        mode="semantic",
        actor_id="alice",
        query_vector=QUERY_VECTOR,
        limit=1,
        reference_time="2023-06-03T09:00:00Z",
        time_filter=True,
    )
    assert texts(found) == ["Alice went hiking in Wales"]
    assert found.time_window is not None and found.time_window.said == "last month"


def test_recall_reads_relative_times_against_the_sessions_latest_message(store):
    store.add_events("s-1", [{"role": "user", "content": "Hello"}], actor_id="alice")
    recalled = store.recall(
        "s-1",
        query="What did Alice do two years ago?",
        query_vector=QUERY_VECTOR,
        limit=1,
        reference_time="2024-05-20T00:00:00Z",
    )
    assert [m.text for m in recalled.memories] == ["Alice went hiking with Bob"]
    assert recalled.time_window is not None and recalled.time_window.said == "two years ago"
    now = store.recall(
        "s-1", query="What did Alice do last week?", query_vector=QUERY_VECTOR, limit=4
    )
    assert now.time_window is not None  # against the message just added: no memory in it
    assert now.time_window.start.year >= 2026
    assert [m.text for m in now.memories] == [f"Alice went hiking, trip {i}" for i in range(4)]


def test_a_bad_reference_time_is_422_naming_the_field(store):
    with pytest.raises(ValidationError) as refused:
        store.search("hiking last week", mode="keyword", reference_time="next Tuesday")
    assert "reference_time" in str(refused.value.details)


def test_time_ranking_false_ranks_as_if_no_time_were_named_and_still_says_what_was_read(store):
    found = store.search(
        "Where did Alice go hiking in May 2023?",
        mode="semantic",
        actor_id="alice",
        query_vector=QUERY_VECTOR,
        limit=2,
        time_ranking=False,
    )
    assert texts(found) == ["Alice went hiking, trip 0", "Alice went hiking, trip 1"]
    assert found.time_window is not None and found.time_window.said == "May 2023"
