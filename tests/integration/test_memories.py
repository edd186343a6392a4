"""Long-term memory on a real Redis server: keep, dedupe, redact, search, change, expire."""

import json
import threading
import time
from datetime import timedelta

import numpy as np
import pytest
from cryptography.fernet import Fernet

from agent_memory.clock import SystemClock
from agent_memory.database.keys import actor_tag
from agent_memory.errors import (
    EmbeddingRequired,
    MemoryNotFound,
    SupersedeActorMismatch,
    ValidationFailed,
    VectorInvalid,
)
from agent_memory.memories.models import MemoryIn, MemoryPatch, SearchRequest
from agent_memory.memories.records import split_memory
from agent_memory.memories.service import Memories
from agent_memory.providers.embeddings import NoEmbedder
from agent_memory.providers.secrets import FernetCipher
from agent_memory.search.cache import IndexCache
from agent_memory.search.selection import Selection
from agent_memory.search.tokenizer import TOKENIZER_VERSION, term_counts
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.models import StorePut
from agent_memory.stores.registry import Stores
from tests.support.clocks import MovableClock
from tests.support.common import unique
from tests.support.databases import database_client

DIM = 8


def _v(*values):
    vector = np.zeros(DIM, dtype=np.float32)
    vector[: len(values)] = values
    return [float(x) for x in vector]


@pytest.fixture
def make_memories(client, redis_url):
    made = []
    binary = database_client(redis_url, binary=True)

    def make(clock=None, cache=None, **settings):
        clock = clock or SystemClock()
        stores = Stores(client, "db", FernetCipher(Fernet.generate_key()), clock)
        name = unique("s")
        config, _ = stores.put(name, StorePut(dimensions=DIM, **settings))
        made.append((stores, name))
        return Memories(
            StoreDatabase(client, binary, config, clock),
            NoEmbedder(DIM),
            cache or IndexCache(),
            "test",
        )

    def reopen(memories, cache=None):
        """The same store in a fresh container: an empty index cache."""
        return Memories(
            StoreDatabase(client, binary, memories.config, SystemClock()),
            NoEmbedder(DIM),
            cache or IndexCache(),
            "test",
        )

    make.reopen = reopen
    yield make
    for stores, name in made:
        stores.delete(name)


def _add(memories, text, vector, actor="alice", **fields):
    return memories.add(MemoryIn(text=text, vector=vector, actor_id=actor, **fields))


def test_keep_read_list_and_count(make_memories):
    memories = make_memories()
    kept = _add(memories, "Deploys to eu-west-1", _v(1), topics=["infra"], importance=0.7)
    assert not kept.duplicate and kept.memory.id.startswith("mem_")
    got = memories.get(kept.memory.id)
    assert (got.text, got.type, got.topics, got.importance) == (
        "Deploys to eu-west-1",
        "semantic",
        ["infra"],
        0.7,
    )
    assert got.versions == []
    _add(memories, "Likes tea", _v(0, 1), actor="bob")
    assert memories.count() == 2
    listed = memories.page(0, 10, None, None)
    assert [m.text for m in listed.memories] == ["Likes tea", "Deploys to eu-west-1"]
    assert [m.text for m in memories.page(0, 10, "alice", None).memories] == [
        "Deploys to eu-west-1"
    ]


def test_a_listing_counts_every_memory_its_filters_match_over_all_pages(make_memories):
    memories = make_memories()
    for i in range(3):
        _add(memories, f"alice fact {i}", _v(*[0] * i, 1))  # orthogonal: none is a duplicate
    _add(memories, "alice went hiking", _v(0, 0, 0, 1), type="episodic")
    _add(memories, "bob fact", _v(1), actor="bob")
    everything = memories.page(0, 2, None, None)
    assert (len(everything.memories), everything.next_offset, everything.total) == (2, 2, 5)
    alices = memories.page(2, 2, "alice", None)
    assert (len(alices.memories), alices.next_offset, alices.total) == (2, None, 4)
    assert memories.page(0, 1, "alice", "episodic").total == 1
    assert memories.page(0, 10, "nobody", None).total == 0
    memories.delete_actor("alice")
    assert memories.page(0, 10, None, None).total == 1


def test_vectors_are_checked_and_required_without_an_embedding_model(make_memories):
    memories = make_memories()
    with pytest.raises(VectorInvalid, match="expected 8 dimensions, got 3"):
        _add(memories, "x", [1.0, 2.0, 3.0])
    with pytest.raises(VectorInvalid):
        _add(memories, "x", _v(float("nan")))
    with pytest.raises(EmbeddingRequired):
        _add(memories, "x", None)
    assert memories.count() == 0


def test_types_are_the_builtin_and_the_stores_own(make_memories):
    memories = make_memories(custom_types=[{"name": "order_issue", "description": "an order"}])
    _add(memories, "Order 1 late", _v(1), type="order_issue")
    with pytest.raises(ValidationFailed, match="semantic, episodic, order_issue"):
        _add(memories, "x", _v(0, 1), type="fact")


def test_a_near_copy_is_not_kept_twice_and_the_threshold_itself_counts(make_memories):
    memories = make_memories(dedupe_threshold=0.92)
    first = _add(memories, "Likes green tea", _v(1, 0))
    again = _add(memories, "Likes green tea!", _v(1, 0))
    assert again.duplicate and again.memory.id == first.memory.id
    at = _add(memories, "Likes tea", _v(0.92, float(np.sqrt(1 - 0.92**2))))
    assert at.duplicate
    below = _add(memories, "Likes coffee", _v(0.91, float(np.sqrt(1 - 0.91**2))))
    assert not below.duplicate
    other_actor = _add(memories, "Likes green tea", _v(1, 0), actor="bob")
    assert not other_actor.duplicate
    assert memories.count() == 3


def test_concurrent_adds_of_one_memory_keep_exactly_one(make_memories):
    memories = make_memories()
    results = []
    start = threading.Barrier(6)

    def add() -> None:
        start.wait()
        results.append(_add(memories, "Moved to Lisbon", _v(0, 0, 1)))

    threads = [threading.Thread(target=add) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(not r.duplicate for r in results) == 1
    assert len({r.memory.id for r in results}) == 1
    assert memories.count() == 1


def test_personal_identifiers_are_removed_before_anything_is_kept(make_memories):
    memories = make_memories()
    kept = _add(memories, "Reach me at jane.doe@example.com or +1 415-555-0132", _v(1))
    assert "example.com" not in kept.memory.text and "[email]" in kept.memory.text
    assert "[phone]" in kept.memory.text and kept.redactions["email"] == 1
    kept_raw = make_memories(redact_pii=False)
    assert "jane" in _add(kept_raw, "jane@example.com", _v(1)).memory.text


def test_topics_are_redacted_too_and_metadata_is_kept_as_sent(make_memories):
    memories = make_memories()
    kept = _add(
        memories,
        "Prefers email contact",
        _v(1),
        topics=["contact", "jane@example.com"],
        metadata={"crm": "jane@example.com"},
    )
    assert kept.memory.topics == ["contact", "[email]"] and kept.redactions == {"email": 1}
    assert kept.memory.metadata == {"crm": "jane@example.com"}
    changed = memories.patch(kept.memory.id, MemoryPatch(topics=["call 415-555-0132"]))
    assert changed.topics == ["call [phone]"]


def test_search_modes_actor_isolation_and_store_wide(make_memories):
    memories = make_memories()
    _add(memories, "Order ORD-2291 arrived damaged", _v(1, 0, 0))
    _add(memories, "Prefers email over phone", _v(0, 1, 0))
    _add(memories, "Bob's order ORD-2291 is his", _v(1, 0, 0), actor="bob")

    def search(**kwargs):
        request = SearchRequest(query=kwargs.pop("query", "ORD-2291"), **kwargs)
        return [m.text for m in memories.search(request)]

    assert search(mode="keyword", actor_id="alice") == ["Order ORD-2291 arrived damaged"]
    semantic = search(mode="semantic", actor_id="alice", query_vector=_v(0, 1, 0))
    assert semantic[0] == "Prefers email over phone"
    assert "Bob's order ORD-2291 is his" not in search(
        mode="hybrid", actor_id="alice", query_vector=_v(1, 0, 0)
    )
    assert len(search(mode="keyword")) == 2  # store-wide: both actors
    with pytest.raises(EmbeddingRequired):
        search(mode="semantic", actor_id="alice")
    scored = memories.search(SearchRequest(query="ORD-2291", mode="keyword", actor_id="alice"))
    assert scored[0].score is not None and scored[0].score > 0


def test_a_warm_search_catches_up_without_reloading(make_memories):
    cache = IndexCache()
    memories = make_memories(cache=cache)
    _add(memories, "first", _v(1))
    request = SearchRequest(query="second", mode="keyword", actor_id="alice")
    assert memories.search(request) == []
    (index,) = cache._entries.values()
    _add(memories, "second", _v(0, 1))
    assert [m.text for m in memories.search(request)] == ["second"]
    assert next(iter(cache._entries.values())) is index and len(index) == 2
    memories.delete(memories.search(request)[0].id)
    assert memories.search(request) == [] and len(index) == 1


def test_an_add_updates_this_containers_index_itself(make_memories, monkeypatch):
    cache = IndexCache()
    memories = make_memories(cache=cache)
    _add(memories, "first", _v(1))
    (index,) = cache._entries.values()

    def no_catch_up(*args):
        raise AssertionError("the add's own write should not need a catch-up read")

    monkeypatch.setattr(memories.indexes, "_catch_up", no_catch_up)
    kept = _add(memories, "second", _v(0, 1))
    request = SearchRequest(query="second", mode="keyword", actor_id="alice")
    assert [m.id for m in memories.search(request)] == [kept.memory.id]
    assert len(index) == 2


def test_an_add_reloads_its_script_after_the_server_forgot_it(make_memories, client):
    memories = make_memories()
    _add(memories, "first", _v(1))
    client.script_flush()
    kept = _add(memories, "second", _v(0, 1))
    assert memories.get(kept.memory.id).text == "second"
    assert memories.count() == 2
    client.script_flush()  # the store-level step of a delete runs its scripts in a pipeline
    memories.delete(kept.memory.id)
    assert memories.count() == 1
    assert [m.text for m in memories.page(0, 10, None, None).memories] == ["first"]


def _write_as_before(memories, memory_id, text, vector, actor="alice", terms=None, **extra):
    """A memory as the code before vectors moved into records kept it: JSON with every field
    (id, actor, term counts) in the actor's memories hash, the vector in its vectors hash, and
    the store-level entries an add makes."""
    binary = memories.binary
    keys = memories.store_keys
    actor_keys = keys.actor(actor)
    now_ms = int(SystemClock().now().timestamp() * 1000)
    record = {
        "id": memory_id,
        "text": text,
        "type": "semantic",
        "actor_id": actor,
        "created_at": now_ms,
        "updated_at": now_ms,
        "expires_at": now_ms + 86_400_000,
        "terms": terms if terms is not None else [TOKENIZER_VERSION, term_counts(text)],
        **extra,
    }
    unit = np.array(vector, dtype=np.float32)
    unit /= np.linalg.norm(unit)
    binary.hset(actor_keys.memories, memory_id, json.dumps(record))
    binary.hset(actor_keys.vectors, memory_id, unit.tobytes())
    gen = binary.hincrby(actor_keys.meta, "gen", 1)
    binary.zadd(actor_keys.log, {f"{gen}:+:{memory_id}": gen})
    memories.store_level.index(memory_id, actor, now_ms, now_ms + 86_400_000)
    return unit


def test_memories_kept_before_vectors_moved_into_records_read_search_change_and_go(
    make_memories,
):
    memories = make_memories()
    _write_as_before(memories, "mem_0000000000000000000a", "Deploys to eu-west-1 on Fridays", _v(1))
    # A record written by another tokenizer version: its counts are ignored, its text is used.
    _write_as_before(
        memories,
        "mem_0000000000000000000b",
        "Likes green tea",
        _v(0, 1),
        terms=[TOKENIZER_VERSION - 1, {"stale": 1}],
    )
    cold = make_memories.reopen(memories)
    assert cold.get("mem_0000000000000000000a").text == "Deploys to eu-west-1 on Fridays"
    assert cold.count() == 2
    found = cold.search(SearchRequest(query="fridays", mode="keyword", actor_id="alice"))
    assert [m.id for m in found] == ["mem_0000000000000000000a"]
    assert cold.search(SearchRequest(query="stale", mode="keyword", actor_id="alice")) == []
    near = cold.search(
        SearchRequest(query="tea", query_vector=_v(0, 1), mode="semantic", actor_id="alice")
    )
    assert near[0].id == "mem_0000000000000000000b" and near[0].similarity == pytest.approx(1.0)
    # A duplicate of an old memory is found by its old vector.
    again = _add(cold, "Likes green tea!", _v(0, 1))
    assert again.duplicate and again.memory.id == "mem_0000000000000000000b"
    # A change that keeps the text keeps the old vector, now inside the record.
    changed = cold.patch("mem_0000000000000000000b", MemoryPatch(importance=0.5))
    assert changed.importance == 0.5
    actor = cold.store_keys.actor("alice")
    assert cold.binary.hget(actor.vectors, "mem_0000000000000000000b") is None
    fresh = make_memories.reopen(memories)
    near = fresh.search(
        SearchRequest(query="tea", query_vector=_v(0, 1), mode="semantic", actor_id="alice")
    )
    assert near[0].id == "mem_0000000000000000000b" and near[0].similarity == pytest.approx(1.0)
    # Superseding an old memory closes it and keeps its vector where it was.
    new = _add(
        fresh, "Deploys to eu-west-1 on Mondays", _v(1, 1), supersedes="mem_0000000000000000000a"
    )
    assert new.superseded == "mem_0000000000000000000a"
    # ... and the closed record takes its vector in, as every write of a record of before does
    assert cold.binary.hget(actor.vectors, "mem_0000000000000000000a") is None
    stored = cold.binary.hget(actor.memories, "mem_0000000000000000000a")
    assert split_memory(stored)[1] == np.array(_v(1), dtype=np.float32).tobytes()
    old = fresh.get("mem_0000000000000000000a")
    assert old.superseded_by == new.memory.id and old.valid_until is not None
    assert [link.id for link in fresh.get(new.memory.id).chain] == [
        "mem_0000000000000000000a",
        new.memory.id,
    ]
    request = SearchRequest(
        query="deploys",
        query_vector=_v(1),
        mode="semantic",
        actor_id="alice",
        include_superseded=True,
    )
    history = fresh.search(request)
    assert "mem_0000000000000000000a" in [m.id for m in history]
    # Forgetting removes it.
    fresh.delete(new.memory.id)
    assert cold.binary.hget(actor.memories, "mem_0000000000000000000a") is None
    assert fresh.count() == 1


def test_a_warm_container_behind_another_still_dedupes_and_counts(make_memories):
    first = make_memories(cache=IndexCache())
    second = make_memories.reopen(first)  # another container: its own cache
    _add(first, "warm-up", _v(0, 0, 1))  # first's index is warm now
    time.sleep(0.002)  # the listing is newest first: creation times a millisecond apart at least
    kept = _add(second, "Likes green tea", _v(1))  # first has not seen this one
    again = _add(first, "Likes green tea!", _v(1))  # written against a stale generation
    assert again.duplicate and again.memory.id == kept.memory.id
    time.sleep(0.002)
    fresh = _add(first, "Lives in Porto", _v(0, 1))
    assert not fresh.duplicate and first.count() == 3
    assert [m.text for m in first.page(0, 10, None, None).memories] == [
        "Lives in Porto",
        "Likes green tea",
        "warm-up",
    ]


def test_changes_keep_versions_newest_first(make_memories):
    memories = make_memories()
    kept = _add(memories, "Lives in Paris", _v(1), topics=["home"])
    memories.patch(kept.memory.id, MemoryPatch(text="Lives in Lisbon", vector=_v(0, 1)))
    changed = memories.patch(kept.memory.id, MemoryPatch(importance=0.9))
    assert changed.text == "Lives in Lisbon" and changed.importance == 0.9
    assert [v.text for v in changed.versions] == ["Lives in Lisbon", "Lives in Paris"]
    assert changed.versions[0].changed_at >= changed.versions[1].changed_at
    hits = memories.search(SearchRequest(query="Lisbon", mode="keyword", actor_id="alice"))
    assert [m.id for m in hits] == [kept.memory.id]
    assert memories.search(SearchRequest(query="Paris", mode="keyword", actor_id="alice")) == []


def test_forget_one_and_forget_an_actor(make_memories):
    memories = make_memories()
    kept = _add(memories, "a", _v(1))
    _add(memories, "b", _v(0, 1))
    _add(memories, "c", _v(0, 0, 1), actor="bob")
    memories.delete(kept.memory.id)
    with pytest.raises(MemoryNotFound):
        memories.get(kept.memory.id)
    with pytest.raises(MemoryNotFound):
        memories.delete(kept.memory.id)
    assert memories.delete_actor("alice") == 1
    assert [m.text for m in memories.page(0, 10, None, None).memories] == ["c"]
    assert memories.count() == 1


def test_expired_memories_vanish_from_reads_counts_and_search(make_memories):
    clock = MovableClock()
    memories = make_memories(clock, memory_ttl_seconds=60)
    kept = _add(memories, "short lived", _v(1))
    clock.moment += timedelta(seconds=61)
    assert memories.count() == 0
    assert memories.page(0, 10, None, None).memories == []
    assert memories.search(SearchRequest(query="short", mode="keyword")) == []
    with pytest.raises(MemoryNotFound):
        memories.get(kept.memory.id)
    assert not _add(memories, "short lived", _v(1)).duplicate  # expired ones do not dedupe


def test_a_compact_index_ranks_and_dedupes_on_exact_rescored_cosines(make_memories, monkeypatch):
    import agent_memory.search.index as search

    monkeypatch.setattr(search, "COMPACT_ABOVE_BYTES", 256)  # compact from the first rows
    cache = IndexCache()
    memories = make_memories(cache=cache)
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((60, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for i, v in enumerate(vectors):
        _add(memories, f"memory {i}", [float(x) for x in v])
    (index,) = cache._entries.values()
    assert index.compact
    query = vectors[7] * 0.9 + vectors[8] * 0.1
    query /= np.linalg.norm(query)
    expected = [f"memory {i}" for i in np.argsort(-(vectors @ query))[:5]]
    request = SearchRequest(
        query="x",
        mode="semantic",
        actor_id="alice",
        limit=5,
        query_vector=[float(x) for x in query],
    )
    found = memories.search(request)
    assert [m.text for m in found] == expected
    assert found[0].similarity == pytest.approx(
        float(vectors[int(expected[0].split()[1])] @ query), abs=1e-5
    )
    again = _add(memories, "memory 7 again", [float(x) for x in vectors[7]])
    assert again.duplicate and again.memory.text == "memory 7"


def test_a_cold_load_in_batches_sees_every_memory(make_memories, monkeypatch):
    import agent_memory.memories.indexes as module

    monkeypatch.setattr(module, "LOAD_BATCH", 7)
    memories = make_memories()
    rng = np.random.default_rng(6)
    vectors = rng.standard_normal((40, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for i, v in enumerate(vectors):
        _add(memories, f"memory {i}", [float(x) for x in v])
    fresh = Memories(
        StoreDatabase(memories.client, memories.binary, memories.config, SystemClock()),
        NoEmbedder(DIM),
        IndexCache(),
        "other",
    )
    request = SearchRequest(
        query="x",
        mode="semantic",
        actor_id="alice",
        limit=40,
        query_vector=[float(x) for x in vectors[0]],
    )
    assert len(fresh.search(request)) == 40
    keyword = fresh.search(
        SearchRequest(query="memory", mode="keyword", actor_id="alice", limit=100)
    )
    assert len(keyword) == 40


def _same_tag_actors() -> tuple[str, str]:
    """Two actor ids whose tags (keys.actor_tag, 16 bits) are the same."""
    seen: dict[str, str] = {}
    for n in range(100_000):
        actor = f"user-{n}"
        tag = actor_tag(actor)
        if tag in seen:
            return seen[tag], actor
        seen[tag] = actor
    raise AssertionError("no two tags met")


def test_a_memory_names_its_actor_in_its_id_and_needs_no_owner_entry(make_memories):
    memories = make_memories()
    one, other = _same_tag_actors()
    first = _add(memories, "Deploys on Fridays", _v(1), actor=one).memory
    second = _add(memories, "Deploys on Mondays", _v(0, 1), actor=other).memory
    for memory, actor in ((first, one), (second, other)):
        assert memory.id[4:8] == actor_tag(actor)
        owners = memories.store_keys.memory_partition(memory.id).memory_owners
        assert memories.client.hget(owners, memory.id) is None
    # Both actors share the tag: each id is found in the actor that holds it.
    assert memories.get(first.id).actor_id == one and memories.get(second.id).actor_id == other
    changed = memories.patch(second.id, MemoryPatch(importance=0.3))
    assert (changed.actor_id, changed.importance) == (other, 0.3)
    page = memories.page(0, 10, None, None)
    assert {(m.id, m.actor_id) for m in page.memories} == {(first.id, one), (second.id, other)}
    # A supersede naming the other actor's memory is that actor's, not a missing one.
    with pytest.raises(SupersedeActorMismatch):
        _add(memories, "Deploys on Sundays", _v(0, 0, 1), actor=one, supersedes=second.id)
    memories.delete(second.id)
    with pytest.raises(MemoryNotFound):
        memories.get(second.id)
    assert memories.get(first.id).text == "Deploys on Fridays" and memories.count() == 1


def test_a_store_of_before_partitions_keeps_its_indexes_where_they_were(make_memories, client):
    """A store document without ``memory_partitions`` (made before them) has one partition,
    under the key names of before; everything reads and writes there."""
    made = make_memories()
    legacy = make_memories.reopen(made)
    legacy = Memories(
        StoreDatabase(
            made.client,
            made.binary,
            made.config.model_copy(update={"memory_partitions": 1}),
            SystemClock(),
        ),
        NoEmbedder(DIM),
        IndexCache(),
        "test",
    )
    kept = _add(legacy, "Deploys on Fridays", _v(1)).memory
    _add(legacy, "Deploys on Mondays", _v(0, 1), supersedes=kept.id)
    base = f"kividb:mem:{made.config.name}:{made.config.incarnation}:{{{made.config.name}}}"
    assert client.zcard(f"{base}:memories") == 1
    assert client.zcard(f"{base}:memories:expiry") == 2
    assert client.zcard(f"{base}:memories:superseded") == 1
    assert legacy.count() == 1 and legacy.get(kept.id).superseded_by is not None
    assert [m.text for m in legacy.page(0, 10, None, None).memories] == ["Deploys on Mondays"]
    assert not client.keys(
        f"kividb:mem:{made.config.name}:*{{{made.config.name}/[0-9]*"
    )  # no partition


def test_an_actors_listing_shows_what_another_container_changed_a_moment_ago(make_memories):
    """A listing with ``actor_id`` is chosen from the actor's index (only the page's records
    are read), which catches up at every read: another container's add, change, supersede and
    delete are in the very next page."""
    first = make_memories(cache=IndexCache())
    second = make_memories.reopen(first)
    kept = _add(first, "Lives in Paris", _v(1)).memory
    assert [m.text for m in first.page(0, 10, "alice", None).memories] == ["Lives in Paris"]
    other = _add(second, "Likes green tea", _v(0, 1)).memory
    second.patch(kept.id, MemoryPatch(text="Lives in Lisbon", vector=_v(1, 0, 1)))
    listed = first.page(0, 10, "alice", None)
    assert [m.text for m in listed.memories] == ["Likes green tea", "Lives in Lisbon"]
    assert listed.total == 2
    newer = _add(second, "Lives in Porto", _v(0, 0, 0, 1), supersedes=kept.id).memory
    second.delete(other.id)
    assert [m.id for m in first.page(0, 10, "alice", None).memories] == [newer.id]
    every = first.page(0, 1, "alice", None, Selection(include_superseded=True))
    assert [m.id for m in every.memories] == [newer.id] and every.total == 2
    assert every.next_offset == 1
