"""Keyed memories (``KeyedMemories``) on a real server (and a cluster, KIVIDB_TEST_CLUSTER=1):
atomic upserts under concurrency, expiry and its refresh, the registry of namespaces never
hiding a kept memory, bad input changing nothing, and nothing left after the store goes."""

from __future__ import annotations

import threading
import tracemalloc
from datetime import timedelta

import numpy as np
import pytest
from cryptography.fernet import Fernet

from agent_memory.clock import SystemClock
from agent_memory.errors import KeyedMemoryNotFound, ValidationFailed, VectorInvalid
from agent_memory.keyed.models import (
    KeyedMemoryPut,
    KeyedSearchRequest,
    NamespacesRequest,
)
from agent_memory.keyed.ranking import Search
from agent_memory.keyed.service import KeyedMemories
from agent_memory.providers.embeddings import NoEmbedder
from agent_memory.providers.secrets import FernetCipher
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.models import StorePut
from agent_memory.stores.registry import Stores
from tests.support.clocks import MovableClock
from tests.support.common import unique
from tests.support.databases import database_client

SEARCH_PEAK_BYTES = 16_000_000
"""The bound docs/limits.md states for a search's memory besides its page (about 16 MB: ``CHUNK``
raw entries, one decoded, the candidates and the live keys of a namespace)."""


@pytest.fixture
def keyed(client, redis_url):
    stores = Stores(client, "db", FernetCipher(Fernet.generate_key()), SystemClock())
    name = unique("keyed")
    config, _ = stores.put(name, StorePut(dimensions=3))
    clock = MovableClock()
    binary = database_client(redis_url, binary=True)
    embedder = NoEmbedder(3)
    yield (
        KeyedMemories(StoreDatabase(binary, binary, config, clock), embedder),
        clock,
        binary,
        config,
    )
    stores.delete(name)


def _put(namespace, key, value, **more):
    return KeyedMemoryPut(namespace=namespace, key=key, value=value, **more)


def test_an_upsert_replaces_the_value_and_keeps_when_it_was_made(keyed):
    memories, clock, _, _ = keyed
    first = memories.put(_put(["u", "prefs"], "theme", {"color": "dark"}))
    clock.moment += timedelta(seconds=5)
    second = memories.put(_put(["u", "prefs"], "theme", {"color": "light"}))
    got = memories.get(["u", "prefs"], "theme")
    assert got.value == {"color": "light"}
    assert got.created_at == first.created_at < second.updated_at == got.updated_at


def test_concurrent_upserts_of_one_key_leave_one_memory_with_one_of_the_values(keyed):
    memories, _, _, _ = keyed
    values = [{"n": i} for i in range(40)]

    def put(value):
        memories.put(_put(["race"], "k", value))

    threads = [threading.Thread(target=put, args=(v,)) for v in values]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    found = memories.search(KeyedSearchRequest(namespace_prefix=["race"], limit=100)).items
    assert len(found) == 1 and found[0].value in values


def test_a_memory_expires_and_a_read_with_refresh_starts_its_time_again(keyed):
    memories, clock, _, _ = keyed
    clock.moment = clock.moment.replace(microsecond=0)  # times are kept in ms
    memories.put(_put(["t"], "a", {"v": 1}, ttl_seconds=60))
    memories.put(_put(["t"], "b", {"v": 2}, ttl_seconds=60))
    clock.moment += timedelta(seconds=50)
    refreshed = memories.get(["t"], "a", refresh_ttl=True)
    assert refreshed.expires_at == clock.moment + timedelta(seconds=60)
    clock.moment += timedelta(seconds=30)  # b is 80 s old: gone; a was read 30 s ago
    with pytest.raises(KeyedMemoryNotFound):
        memories.get(["t"], "b")
    keys = [i.key for i in memories.search(KeyedSearchRequest(namespace_prefix=["t"])).items]
    assert keys == ["a"]
    clock.moment += timedelta(seconds=31)
    assert memories.search(KeyedSearchRequest(namespace_prefix=["t"])).items == []
    assert memories.namespaces(NamespacesRequest()).namespaces == []


def test_a_namespace_is_listed_while_it_holds_a_memory_and_not_after_its_last_goes(keyed):
    memories, clock, binary, config = keyed
    memories.put(_put(["a", "b"], "k", {"v": 1}))
    memories.put(_put(["a", "c"], "k", {"v": 1}))
    assert memories.namespaces(NamespacesRequest()).namespaces == [["a", "b"], ["a", "c"]]
    memories.delete(["a", "b"], "k")
    assert memories.namespaces(NamespacesRequest()).namespaces == [["a", "c"]]
    # the empty namespace stays registered for a grace period, then the listing drops it
    field = '["a","b"]'
    assert binary.hexists(config.keys().keyed_namespaces, field)
    clock.moment += timedelta(minutes=2)
    memories.namespaces(NamespacesRequest())
    assert not binary.hexists(config.keys().keyed_namespaces, field)
    # and a put afterwards registers it again
    memories.put(_put(["a", "b"], "k", {"v": 2}))
    assert ["a", "b"] in memories.namespaces(NamespacesRequest()).namespaces


def test_bad_input_changes_nothing(keyed):
    memories, _, _, _ = keyed
    memories.put(_put(["n"], "k", {"v": 1}, vectors=[[1, 0, 0]]))
    with pytest.raises(VectorInvalid):
        memories.put(_put(["n"], "k", {"v": 2}, vectors=[[1, 0]]))
    with pytest.raises(VectorInvalid):
        memories.put(_put(["n"], "k", {"v": 2}, vectors=[[0, 0, 0]]))
    with pytest.raises(ValidationFailed):
        memories.search(KeyedSearchRequest(filter={"a..b": 1}))
    with pytest.raises(ValidationFailed):
        memories.search(KeyedSearchRequest(filter={"v": {"$in": [1]}}))
    assert memories.get(["n"], "k").value == {"v": 1}


def test_search_by_meaning_scores_each_memory_by_its_closest_vector(keyed):
    memories, _, _, _ = keyed
    memories.put(_put(["s"], "two", {"v": 1}, vectors=[[1, 0, 0], [0, 1, 0]]))
    memories.put(_put(["s"], "one", {"v": 2}, vectors=[[0, 0, 1]]))
    memories.put(_put(["s"], "none", {"v": 3}, index=False))
    found = memories.search(KeyedSearchRequest(namespace_prefix=["s"], query_vector=[0, 1, 0]))
    assert [i.key for i in found.items] == ["two", "one"]
    assert found.items[0].similarity == pytest.approx(1.0)
    assert found.items[1].similarity == pytest.approx(0.0, abs=1e-6)
    assert 0 <= found.items[1].score <= found.items[0].score <= 1
    unit = np.array([1, 1, 0]) / np.sqrt(2)
    near = memories.search(KeyedSearchRequest(namespace_prefix=["s"], query_vector=list(unit)))
    assert near.items[0].similarity == pytest.approx(float(unit[1]), abs=1e-6)


def test_deleting_the_store_leaves_no_keyed_key(client, redis_url):
    stores = Stores(client, "db", FernetCipher(Fernet.generate_key()), SystemClock())
    name = unique("keyedgone")
    config, _ = stores.put(name, StorePut(dimensions=3))
    binary = database_client(redis_url, binary=True)
    memories = KeyedMemories(StoreDatabase(binary, binary, config, SystemClock()), NoEmbedder(3))
    for i in range(5):
        memories.put(_put(["x", str(i)], "k", {"i": i}))
    stores.delete(name)
    left = list(binary.scan_iter(match=config.keys().all_pattern, count=1000))
    assert left == []


def test_a_wide_search_holds_a_chunk_of_entries_at_once_not_every_one_under_its_prefix(keyed):
    """Issue 32: a search loaded every entry under its prefix at once (8,000 values of 60 KB
    peaked at 1,071 MB). Now it reads them ``CHUNK`` at a time and keeps only what ranks them:
    600 values of 60 KB (36 MB of JSON) are searched within the bound docs/limits.md states,
    whatever their number, newest first and by meaning alike."""
    memories, clock, _, _ = keyed
    value = {"notes": ["x" * 59] * 1000}  # 60 KB of JSON, a thousand strings once decoded
    for i in range(600):
        clock.moment += timedelta(milliseconds=1)
        vector = [1.0, i / 600, 0.0]
        memories.put(_put(["wide", str(i % 7)], f"k{i}", value, vectors=[vector]))
    newest = KeyedSearchRequest(namespace_prefix=["wide"], limit=5)
    nearest = KeyedSearchRequest(namespace_prefix=["wide"], limit=5, query_vector=[0, 1, 0])
    for request, first in ((newest, "k599"), (nearest, "k599")):
        tracemalloc.start()
        try:
            found = memories.search(request)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert [i.key for i in found.items][:1] == [first] and len(found.items) == 5
        assert peak < SEARCH_PEAK_BYTES, f"peak {peak / 1e6:.1f} MB"


def test_a_memory_changed_between_a_searchs_two_reads_is_answered_as_it_is_then(keyed):
    memories, _, binary, _ = keyed
    memories.put(_put(["two"], "a", {"kind": "pet"}))
    memories.put(_put(["two"], "b", {"kind": "pet"}))
    memories.put(_put(["two"], "c", {"kind": "pet"}))
    request = KeyedSearchRequest(namespace_prefix=["two"], filter={"kind": "pet"})
    # now_ms 0: every memory is live for both passes (the store's clock is a test's)
    chosen = Search(binary, memories._namespace_keys, 0, request.filter, None).best([("two",)], 10)
    assert [c.key for c in chosen] == ["a", "b", "c"]  # one moment: by key
    memories.put(_put(["two"], "a", {"kind": "plant"}))  # no longer matches the filter
    memories.delete(["two"], "b")  # gone
    matching = Search(binary, memories._namespace_keys, 0, request.filter, None)
    assert [entry.record.key for entry, _, _ in matching.page(chosen)] == ["c"]
