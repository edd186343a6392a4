"""Fields in keyword search over HTTP: a memory's topics and metadata values find it by keyword
(and so in hybrid search), ranked below memories holding the words in their text, and an update
of its topics or metadata changes what finds it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kividb_memory import MemoryClient, StoreClient
from tests.support.common import unique


@pytest.fixture
def store(memory: MemoryClient) -> Iterator[StoreClient]:
    name = unique("fields")
    memory.put_store("local", name, dimensions=3, dedupe_threshold=1.0)
    store = memory.store("local", name)
    yield store
    memory.delete_store("local", name)


def texts(found) -> list[str]:
    return [m.text for m in found.memories]


def test_topics_and_metadata_values_find_a_memory_below_the_text(store):
    store.add_memory(
        "Planted tomatoes on the balcony",
        actor_id="ann",
        topics=["Gardening"],
        vector=[1.0, 0.0, 0.0],
    )
    store.add_memory("Read a book about gardening", actor_id="ann", vector=[0.0, 1.0, 0.0])
    metadata = {"order": "ORD-2291", "carrier": {"name": "DHL"}, "urgent": True}
    store.add_memory(
        "The parcel never came", actor_id="ann", vector=[0.0, 0.0, 1.0], metadata=metadata
    )
    found = store.search("gardening", mode="keyword", actor_id="ann", limit=5)
    assert texts(found) == ["Read a book about gardening", "Planted tomatoes on the balcony"]
    assert found.memories[0].score > found.memories[1].score > 0
    assert texts(store.search("Where is ORD-2291?", mode="keyword", actor_id="ann")) == [
        "The parcel never came"
    ]
    assert texts(store.search("dhl", mode="keyword", actor_id="ann")) == ["The parcel never came"]
    # keys and booleans are not words of a memory
    assert texts(store.search("carrier urgent true", mode="keyword", actor_id="ann")) == []
    hybrid = store.search("gardening", mode="hybrid", actor_id="ann", query_vector=[0, 0, 1.0])
    assert "Planted tomatoes on the balcony" in texts(hybrid)


def test_changing_a_memorys_topics_or_metadata_changes_what_finds_it(store):
    kept = store.add_memory(
        "Planted tomatoes",
        actor_id="ann",
        topics=["gardening"],
        metadata={"place": "balcony"},
        vector=[1.0, 0.0, 0.0],
    )
    assert texts(store.search("balcony", mode="keyword", actor_id="ann")) == ["Planted tomatoes"]
    store.update_memory(kept.id, topics=["cooking"], metadata={"place": "kitchen"})
    for gone in ("gardening", "balcony"):
        assert texts(store.search(gone, mode="keyword", actor_id="ann")) == [], gone
    for now in ("cooking", "kitchen"):
        assert texts(store.search(now, mode="keyword", actor_id="ann")) == ["Planted tomatoes"]
