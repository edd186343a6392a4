"""A search or a filtered listing without ``actor_id`` reads every memory of the store: past
``memory_reads.STORE_WIDE_MAX_BYTES`` of vectors it is a 409 ``store_too_large`` that says to pass
``actor_id`` (which still works), and nothing changes."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from agent_memory.clock import SystemClock
from agent_memory.errors import StoreTooLarge
from agent_memory.memories import reads as memory_reads
from agent_memory.memories.models import MemoryIn, SearchRequest
from agent_memory.memories.service import Memories
from agent_memory.providers.embeddings import NoEmbedder
from agent_memory.providers.secrets import FernetCipher
from agent_memory.search.cache import IndexCache
from agent_memory.search.selection import Selection
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.models import StorePut
from agent_memory.stores.registry import Stores
from tests.support.common import unique
from tests.support.databases import database_client


@pytest.fixture
def store(client, redis_url):
    stores = Stores(client, "db", FernetCipher(Fernet.generate_key()), SystemClock())
    name = unique("wide")
    config, _ = stores.put(name, StorePut(dimensions=4, dedupe_threshold=1.0))
    memories = Memories(
        StoreDatabase(client, database_client(redis_url, binary=True), config, SystemClock()),
        NoEmbedder(4),
        IndexCache(),
        "wide",
    )
    for i in range(4):
        memories.add(MemoryIn(text=f"fact {i}", actor_id=f"a{i % 2}", vector=[1, i, 0, 0]))
    yield memories
    stores.delete(name)


def test_store_wide_reads_past_the_bound_are_a_409_and_per_actor_ones_work(store, monkeypatch):
    everyone = SearchRequest(query="fact", mode="keyword", limit=10)
    assert len(store.search(everyone)) == 4  # 4 x 4 x 4 = 64 bytes of vectors: allowed
    monkeypatch.setattr(memory_reads, "STORE_WIDE_MAX_BYTES", 3 * 4 * 4)  # 3 memories
    with pytest.raises(StoreTooLarge) as refused:
        store.search(everyone)
    assert refused.value.code == "store_too_large"
    assert refused.value.message == (
        "A search without actor_id reads every memory of the store, and this store holds 4: "
        "at most 3 of 4 dimensions are read at once. Pass actor_id."
    )
    with pytest.raises(StoreTooLarge, match="A listing with these filters without actor_id"):
        store.page(0, 10, None, "semantic")
    with pytest.raises(StoreTooLarge):
        store.page(0, 10, None, None, Selection(include_superseded=True))
    # per actor, and the store-wide listing of current memories (an index), still answer
    one = SearchRequest(query="fact", mode="keyword", actor_id="a1", limit=10)
    assert sorted(m.text for m in store.search(one)) == ["fact 1", "fact 3"]
    assert store.page(0, 10, "a0", "semantic").total == 2
    assert store.page(0, 10, None, None).total == 4
    assert store.count() == 4
