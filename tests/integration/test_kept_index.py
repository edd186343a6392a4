"""Kept indexes on a real Redis server: a new container reads an actor's index from the database
instead of building it from every record, and still sees every write."""

import numpy as np
import pytest
from cryptography.fernet import Fernet

from agent_memory.clock import SystemClock
from agent_memory.database.keys import actor_bucket
from agent_memory.memories import indexes as indexes_module
from agent_memory.memories.kept_codes import KeptCodes
from agent_memory.memories.models import MemoryIn, MemoryPatch, SearchRequest
from agent_memory.memories.scripts import KEPT_GEN
from agent_memory.memories.service import Memories
from agent_memory.providers.embeddings import NoEmbedder
from agent_memory.providers.secrets import FernetCipher
from agent_memory.search import snapshot
from agent_memory.search.cache import IndexCache
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.models import StorePut
from agent_memory.stores.registry import Stores
from tests.support.common import unique
from tests.support.databases import database_client

DIM = 16
WORDS = [
    "coffee",
    "tea",
    "paris",
    "berlin",
    "hiking",
    "piano",
    "chess",
    "garden",
    "sushi",
    "tango",
    "violin",
    "kayak",
]


@pytest.fixture
def store(client, redis_url):
    stores = Stores(client, "db", FernetCipher(Fernet.generate_key()), SystemClock())
    name = unique("kept")
    config, _ = stores.put(name, StorePut(dimensions=DIM))
    binary = database_client(redis_url, binary=True)

    def container():
        """The store as a new container sees it: an empty index cache."""
        return Memories(
            StoreDatabase(client, binary, config, SystemClock()), NoEmbedder(DIM), IndexCache(), "t"
        )

    yield container, config
    stores.delete(name)
    assert not list(client.scan_iter(match=config.keys().all_pattern))


def _vector(rng):
    return [float(x) for x in rng.standard_normal(DIM)]


def _fill(memories, count, rng, actor="alice"):
    ids = []
    for n in range(count):
        text = f"{WORDS[n % 12]} {WORDS[(n * 5) % 12]} note {n}"
        ids.append(memories.add(MemoryIn(text=text, vector=_vector(rng), actor_id=actor)).memory.id)
    return ids


def _answers(memories, rng_seed=11, actor="alice"):
    rng = np.random.default_rng(rng_seed)
    found = []
    for mode in ("semantic", "keyword", "hybrid"):
        for query in ("coffee paris", "tango", "note 7"):
            vector = _vector(rng) if mode != "keyword" else None
            request = SearchRequest(
                query=query, mode=mode, actor_id=actor, limit=10, query_vector=vector
            )
            found.append([(m.id, m.score) for m in memories.search(request)])
    return found


def _same(got, want):
    """The same memories in the same order, scores equal to float32 precision."""
    assert [[i for i, _ in found] for found in got] == [[i for i, _ in found] for found in want]
    for found, wanted in zip(got, want, strict=True):
        assert [s for _, s in found] == pytest.approx([s for _, s in wanted], abs=2e-6)


def _no_build(monkeypatch):
    def refuse(self, actor):
        raise AssertionError("built from the records")

    monkeypatch.setattr(indexes_module.ActorIndexes, "_load", refuse)


def _kept_gen(client, config, actor="alice"):
    meta = config.keys().actor(actor_bucket(actor)).meta
    return int(client.hget(meta, KEPT_GEN) or -1), int(client.hget(meta, "gen") or 0)


def test_a_new_container_reads_the_kept_index_and_answers_the_same(store, client, monkeypatch):
    container, config = store
    first = container()
    _fill(first, 150, np.random.default_rng(1))
    want = _answers(first)  # the first read builds the index and keeps it
    kept, gen = _kept_gen(client, config)
    assert kept == gen == 150
    _no_build(monkeypatch)
    _same(_answers(container()), want)


def test_a_new_container_applies_the_changes_made_since_the_index_was_kept(
    store, client, monkeypatch
):
    container, config = store
    first = container()
    rng = np.random.default_rng(2)
    ids = _fill(first, 100, rng)
    _answers(first)
    other = container()  # writes from another container, after the index was kept
    replaced = other.add(
        MemoryIn(text="kayak and violin", vector=_vector(rng), actor_id="alice", supersedes=ids[5])
    ).memory.id
    _fill(other, 3, rng)
    assert _kept_gen(client, config)[0] == 100
    want = _answers(first)  # caught up from the change log
    _no_build(monkeypatch)
    fresh = container()
    _same(_answers(fresh), want)
    shown = {
        m.id
        for m in fresh.search(
            SearchRequest(query="kayak violin", mode="keyword", actor_id="alice", limit=50)
        )
    }
    assert replaced in shown and ids[5] not in shown


def test_a_removal_or_a_changed_text_leaves_nothing_of_it_in_the_database(
    store, client, monkeypatch
):
    container, config = store
    first = container()
    rng = np.random.default_rng(12)
    ids = _fill(first, 100, rng)
    secret = first.add(
        MemoryIn(
            text="diagnosis xylophonecancer7",
            vector=_vector(rng),
            actor_id="alice",
            topics=["hivstatus"],
            metadata={"passport": "P99887766"},
        )
    ).memory.id
    renamed = ids[4]
    first.patch(renamed, MemoryPatch(text="codeword zebrafinch42", vector=_vector(rng)))
    _answers(first)  # the kept index now holds both words
    actor = config.keys().actor(actor_bucket("alice"))
    binary = first.binary
    assert b"xylophonecancer7" in binary.get(actor.index_parts[0])
    assert b"zebrafinch42" in binary.get(actor.index_parts[0])
    other = container()
    other.delete(secret)  # from another container
    other.patch(renamed, MemoryPatch(text="tango in berlin", vector=_vector(rng)))

    def stored() -> bytes:
        return b"".join(binary.dump(key) or b"" for key in binary.keys(actor.all()[0][:-9] + "*"))

    for word in (b"xylophonecancer7", b"hivstatus", b"P99887766"):
        assert word not in stored(), word  # at the removal's answer, nowhere in the actor's keys
    assert binary.get(actor.index_parts[0]) is None  # (a changed text: in its versions only)
    want = _answers(first)  # a read keeps the index again, without them
    assert _kept_gen(client, config)[0] == _kept_gen(client, config)[1]
    kept = binary.get(actor.index_parts[0])
    assert b"xylophonecancer7" not in kept and b"zebrafinch42" not in kept and b"tango" in kept
    _no_build(monkeypatch)
    _same(_answers(container()), want)


def test_a_kept_index_falling_behind_is_written_again_by_a_reader(store, client, monkeypatch):
    container, config = store
    first = container()
    rng = np.random.default_rng(3)
    _fill(first, 100, rng)
    _answers(first)
    lag = indexes_module.keep_lag(100)
    _fill(first, lag + 1, rng)
    assert _kept_gen(client, config)[0] == 100  # writes alone do not keep it
    first.search(SearchRequest(query="coffee", mode="keyword", actor_id="alice"))
    kept, gen = _kept_gen(client, config)
    assert kept == gen == 100 + lag + 1
    want = _answers(first)
    _no_build(monkeypatch)
    _same(_answers(container()), want)


def test_a_kept_index_the_log_no_longer_reaches_is_rebuilt(store, client):
    container, config = store
    first = container()
    rng = np.random.default_rng(4)
    ids = _fill(first, 80, rng)
    _answers(first)
    for memory_id in ids[:70]:  # more changes than the log keeps, read by nobody
        first.delete(memory_id)
    _fill(first, 90, rng)
    want = _answers(first)
    fresh = container()
    _same(_answers(fresh), want)
    kept, gen = _kept_gen(client, config)
    assert kept == gen


def test_small_actors_keep_no_index(store, client):
    container, config = store
    memories = container()
    _fill(memories, indexes_module.KEEP_FROM - 1, np.random.default_rng(6), actor="bob")
    _answers(memories, actor="bob")
    assert _kept_gen(client, config, "bob")[0] == -1
    assert client.get(config.keys().actor(actor_bucket("bob")).index_parts[0]) is None


def test_an_index_too_large_to_keep_is_built_and_not_tried_again(store, client, monkeypatch):
    container, config = store
    memories = container()
    _fill(memories, 70, np.random.default_rng(7))
    calls = []
    real = indexes_module.snapshot.dump

    def too_large(index, max_parts):
        calls.append(index.gen)
        return real(index, 0)

    monkeypatch.setattr(indexes_module.snapshot, "dump", too_large)
    want = _answers(memories)
    assert calls == [70] and _kept_gen(client, config)[0] == -1
    _same(_answers(memories), want) and calls == [70]


def test_a_loaded_index_reads_the_records_it_shows_once(store, monkeypatch):
    import redis.connection

    container, _ = store
    first = container()
    _fill(first, 100, np.random.default_rng(8))
    want = _answers(first)
    fresh = container()
    _same(_answers(fresh), want)  # reads the records it shows, then holds them
    indexes_module.wait_for_exact()
    sent = []
    real = redis.connection.AbstractConnection.send_packed_command
    monkeypatch.setattr(
        redis.connection.AbstractConnection,
        "send_packed_command",
        lambda self, *a, **k: sent.append(1) or real(self, *a, **k),
    )
    request = SearchRequest(query="tango", mode="keyword", actor_id="alice", limit=10)
    assert [m.id for m in fresh.search(request)] == [i for i, _ in want[4]]
    assert len(sent) == 1  # the generation only: the records shown are held


def test_a_loaded_index_goes_exact_in_the_background_and_answers_the_same(store):
    container, _ = store
    first = container()
    _fill(first, 100, np.random.default_rng(9))
    want = _answers(first)
    cache = IndexCache()
    fresh = Memories(
        StoreDatabase(first.client, first.binary, first.config, SystemClock()),
        NoEmbedder(DIM),
        cache,
        "t",
    )
    _same(_answers(fresh), want)  # the first read loads it, the next read its exact vectors
    indexes_module.wait_for_exact()
    (index,) = cache._entries.values()
    assert index.exact and not index.compact
    _same(_answers(fresh), want)


def test_exact_reads_of_many_actors_take_one_thread_of_the_process(store):
    import threading

    container, _ = store
    first = container()
    rng = np.random.default_rng(10)
    actors = [f"actor-{n}" for n in range(4)]
    for actor in actors:
        _fill(first, 70, rng, actor=actor)
        _answers(first, actor=actor)  # keeps each actor's index
    fresh = container()
    for _ in range(2):  # the second read of each asks for its exact vectors
        for actor in actors:
            fresh.search(SearchRequest(query="tango", mode="keyword", actor_id=actor))
    readers = [t for t in threading.enumerate() if t.name == "index-exact"]
    assert len(readers) == 1
    indexes_module.wait_for_exact()
    for actor in actors:
        index = fresh.indexes.warm(actor_bucket(actor))
        assert index is not None and index.exact


@pytest.mark.parametrize("damage", ["garbage", "a hash", "ahead of the actor"])
def test_an_unreadable_kept_index_is_replaced(store, client, monkeypatch, damage):
    from agent_memory.search import snapshot
    from agent_memory.search.index import ActorIndex

    container, config = store
    first = container()
    _fill(first, 70, np.random.default_rng(13))
    want = _answers(first)
    part = config.keys().actor(actor_bucket("alice")).index_parts[0]
    client.delete(part)
    if damage == "garbage":
        client.set(part, "KVX1 garbage")
    elif damage == "a hash":
        client.hset(part, "x", "y")
    else:  # a well-formed kept index of a generation the actor never had
        first.binary.set(part, snapshot.dump(ActorIndex(dimensions=DIM, gen=10**9))[0])
    _same(_answers(container()), want)  # built from the records, not a failure
    kept, gen = _kept_gen(client, config)
    assert kept == gen and client.type(part) == "string"
    assert snapshot.header([first.binary.get(part)])["gen"] == gen
    _no_build(monkeypatch)
    _same(_answers(container()), want)


def test_a_new_container_reads_its_candidates_codes_across_the_forms_parts(
    store, client, redis_url, monkeypatch
):
    """The kept form in three parts, rows' codes cut between two of them: a new container's
    searches fetch their candidates' codes (``KeptCodes``, one script) and answer the same."""
    container, config = store
    first = container()
    _fill(first, 150, np.random.default_rng(2))
    want = _answers(first)
    actor = config.keys().actor(actor_bucket("alice"))
    binary = database_client(redis_url, binary=True)
    head = snapshot.header([binary.get(actor.index_parts[0])])
    codes_at, width = snapshot.code_span(head)
    assert width == DIM
    monkeypatch.setattr(snapshot, "PART_BYTES", codes_at + 41 * DIM + 7)  # row 41 is cut
    client.hdel(actor.meta, KEPT_GEN)
    client.delete(*actor.index_parts)
    _same(_answers(container()), want)  # a new container builds it and keeps it, in parts
    assert binary.exists(actor.index_parts[1]) == 1
    fetched = []
    real = KeptCodes._read_rows

    def counting(self, picked):
        found = real(self, picked)
        fetched.append((len(picked), found is not None))
        return found

    monkeypatch.setattr(KeptCodes, "_read_rows", counting)
    _no_build(monkeypatch)
    _same(_answers(container()), want)
    assert fetched and all(read for _, read in fetched)  # from the kept form, not the vectors


def test_codes_of_a_form_kept_again_meanwhile_come_from_the_stored_vectors(
    store, redis_url, monkeypatch
):
    container, config = store
    _fill(container(), 120, np.random.default_rng(3))
    _answers(container())  # keeps the form
    actor = config.keys().actor(actor_bucket("alice"))
    binary = database_client(redis_url, binary=True)
    form = binary.get(actor.index_parts[0])
    head = snapshot.header([form])
    header = form[: int(head["_data"])]
    source = KeptCodes(binary, actor, head, header)
    source.ids = snapshot.load([form], DIM).ids
    rows = np.array([0, 5, 119], dtype=np.intp)
    kept = source.rows(rows)
    made = []
    real = KeptCodes._from_vectors
    monkeypatch.setattr(
        KeptCodes, "_from_vectors", lambda self, picked: made.append(picked) or real(self, picked)
    )
    assert np.array_equal(source.rows(rows), kept) and made == []  # the form, as kept
    changed = bytearray(header)
    changed[-1] ^= 1  # another container kept the form again: its header is another
    binary.setrange(actor.index_parts[0], 0, bytes(changed))
    assert np.array_equal(source.rows(rows), kept)  # the same codes, made from the vectors
    assert made == [[0, 5, 119]]
