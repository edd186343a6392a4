"""Removing a custom type memories use, on a real Redis server: which memories count (current,
superseded, changed away from the type; not expired ones) and what a registry without the count
does (refuses while the store holds memories)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from cryptography.fernet import Fernet

from agent_memory.errors import Conflict
from agent_memory.memories.models import MemoryIn, MemoryPatch
from agent_memory.memories.service import Memories
from agent_memory.memories.type_usage import types_in_use
from agent_memory.providers.embeddings import NoEmbedder
from agent_memory.providers.secrets import FernetCipher
from agent_memory.search.cache import IndexCache
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.models import CustomType, StorePut
from agent_memory.stores.registry import Stores
from tests.support.clocks import MovableClock
from tests.support.common import unique
from tests.support.databases import database_client

DIM = 4
TYPES = [CustomType(name=n, description=f"about {n}") for n in ("recipe", "trip", "unused")]


@pytest.fixture
def made(client, redis_url):
    clock = MovableClock()
    binary = database_client(redis_url, binary=True)

    class InUse:
        def types(self, store, types):
            return types_in_use(binary, store, types, clock)

        def profile_fields(self, store, names):
            return {}

    stores = Stores(client, "db", FernetCipher(Fernet.generate_key()), clock, in_use=InUse())
    name = unique("s")
    config, _ = stores.put(
        name, StorePut(dimensions=DIM, custom_types=TYPES, memory_ttl_seconds=3600)
    )
    memories = Memories(
        StoreDatabase(client, binary, config, clock), NoEmbedder(DIM), IndexCache(), "test"
    )
    yield clock, stores, name, memories, InUse().types
    stores.delete(name)


def _add(memories, text, type_, actor="a", **fields):
    vector = [1.0, float(len(text)), 0.0, 0.0]
    return memories.add(MemoryIn(text=text, vector=vector, actor_id=actor, type=type_, **fields))


def test_superseded_and_changed_memories_count_expired_ones_do_not(made):
    clock, stores, name, memories, usage = made
    old = _add(memories, "cooks risotto", "recipe").memory
    _add(memories, "cooks paella now", "recipe", supersedes=old.id)  # old: superseded, live
    moved = _add(memories, "went to Porto", "trip", actor="b").memory
    memories.patch(moved.id, MemoryPatch(type="episodic"))  # "trip" stays in its history
    config = stores.get(name)
    assert usage(config, frozenset({"recipe", "trip", "unused"})) == {"recipe": 2, "trip": 1}

    with pytest.raises(Conflict) as refused:
        stores.put(name, StorePut(custom_types=[]))
    assert refused.value.details == [
        {"field": "custom_types", "problem": "2 memories use the type 'recipe'"},
        {"field": "custom_types", "problem": "1 memories use the type 'trip'"},
    ]
    assert [t.name for t in stores.get(name).custom_types] == ["recipe", "trip", "unused"]

    clock.moment += timedelta(seconds=3601)  # every memory has expired
    assert usage(config, frozenset({"recipe", "trip"})) == {}
    assert stores.put(name, StorePut(custom_types=[]))[0].custom_types == []


def test_without_a_count_a_store_with_memories_keeps_its_types(made, client):
    clock, counted, name, memories, _ = made
    plain = Stores(client, "db", FernetCipher(Fernet.generate_key()), clock)
    assert plain.put(name, StorePut(custom_types=TYPES[:2]))[1] is False  # no memories yet
    _add(memories, "went to Porto", "episodic")
    with pytest.raises(Conflict, match="holds 1 memories"):
        plain.put(name, StorePut(custom_types=TYPES[:1]))
    assert [t.name for t in counted.get(name).custom_types] == ["recipe", "trip"]
