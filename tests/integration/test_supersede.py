"""Memories that change, on a real Redis server: supersede, current by default, as_of, chains.

The vegetarian story of the issue ("I am vegetarian", later "I started eating fish again"),
the errors that store nothing, concurrent supersedes (exactly one wins) with a reader checking
the invariant all along, other containers' warm caches, forgetting chains, and a property test
(hypothesis) holding every read to a model of what is current when.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import numpy as np
import pytest
from cryptography.fernet import Fernet
from hypothesis import HealthCheck, given, settings, strategies as st

from agent_memory.clock import SystemClock, from_ms, to_ms
from agent_memory.errors import (
    AlreadySuperseded,
    MemoryNotFound,
    SupersedeActorMismatch,
    SupersededNotFound,
)
from agent_memory.memories.models import MemoryIn, MemoryPatch, SearchRequest
from agent_memory.memories.service import Memories
from agent_memory.providers.embeddings import NoEmbedder
from agent_memory.providers.secrets import FernetCipher
from agent_memory.search.cache import IndexCache
from agent_memory.search.selection import Selection
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.models import StorePut
from agent_memory.stores.registry import Stores
from tests.support.clocks import MovableClock
from tests.support.common import unique
from tests.support.databases import database_client

DIM = 8
MODES = ("semantic", "keyword", "hybrid")


def _v(*values: float) -> list[float]:
    vector = np.zeros(DIM, dtype=np.float32)
    vector[: len(values)] = values
    return [float(x) for x in vector]


@pytest.fixture
def make_memories(client, redis_url):
    made = []
    binary = database_client(redis_url, binary=True)

    def make(clock=None, cache=None, **settings_):
        stores = Stores(client, "db", FernetCipher(Fernet.generate_key()), clock or SystemClock())
        name = unique("s")
        config, _ = stores.put(name, StorePut(dimensions=DIM, **settings_))
        made.append((stores, name))
        return Memories(
            StoreDatabase(client, binary, config, clock or SystemClock()),
            NoEmbedder(DIM),
            cache or IndexCache(),
            "test",
        )

    def reopen(memories, clock=None):
        """The same store in another container: an index cache of its own."""
        return Memories(
            StoreDatabase(client, binary, memories.config, clock or SystemClock()),
            NoEmbedder(DIM),
            IndexCache(),
            "test",
        )

    make.reopen = reopen
    yield make
    for stores, name in made:
        stores.delete(name)


def _clock() -> MovableClock:
    """A clock the test moves, on a whole millisecond (the precision of stored times)."""
    clock = MovableClock()
    clock.moment = clock.moment.replace(microsecond=clock.moment.microsecond // 1000 * 1000)
    return clock


def _add(memories, text, vector, actor="alice", **fields):
    return memories.add(MemoryIn(text=text, vector=vector, actor_id=actor, **fields))


def _search(memories, query, mode="keyword", actor="alice", **fields):
    return memories.search(
        SearchRequest(query=query, mode=mode, actor_id=actor, query_vector=_v(1, 1, 1, 1), **fields)
    )


def _texts(views):
    return sorted(v.text for v in views)


def _snapshot(memories):
    """Every key of the store and its value, to prove a refused request changed nothing."""
    client = memories.binary
    found = {}
    for key in client.scan_iter(match=memories.store_keys.all_pattern):
        kind = client.type(key).decode()
        if kind == "hash":
            found[key] = client.hgetall(key)
        elif kind == "zset":
            found[key] = client.zrange(key, 0, -1, withscores=True)
        elif kind == "set":
            found[key] = sorted(client.smembers(key))
        else:
            found[key] = client.get(key)
    return found


# --- the vegetarian story -----------------------------------------------------------------------


def test_the_vegetarian_story_ends_with_one_current_diet_fact(make_memories):
    clock = _clock()
    memories = make_memories(clock)
    work = _add(memories, "Works at Northwind Labs", _v(0, 0, 1), topics=["work"]).memory
    old = _add(memories, "I am vegetarian", _v(1), topics=["diet"]).memory
    between = clock.moment + timedelta(seconds=5)
    clock.moment += timedelta(seconds=10)
    kept = _add(
        memories, "I started eating fish again", _v(0.8, 0.6), topics=["diet"], supersedes=old.id
    )
    new = kept.memory
    assert not kept.duplicate and kept.superseded == old.id
    assert (new.supersedes, new.valid_until, new.superseded_by) == (old.id, None, None)
    assert new.valid_from == clock.moment

    for mode in MODES:
        found = _search(memories, "vegetarian fish Northwind", mode)
        assert _texts(found) == ["I started eating fish again", "Works at Northwind Labs"], mode
    assert _texts(memories.page(0, 10, None, None).memories) == _texts([new, work])
    assert _texts(memories.page(0, 10, "alice", None).memories) == _texts([new, work])
    assert memories.count() == 2
    assert memories.page(0, 10, None, None).total == 2

    everything = memories.page(0, 10, "alice", None, Selection(include_superseded=True))
    assert everything.total == 3
    closed = next(m for m in everything.memories if m.id == old.id)
    assert closed.valid_until == clock.moment and closed.superseded_by == new.id
    found = _search(memories, "vegetarian", include_superseded=True)
    assert [m.id for m in found] == [old.id] and found[0].valid_until is not None

    then = _search(memories, "vegetarian fish Northwind", as_of=between)
    assert _texts(then) == ["I am vegetarian", "Works at Northwind Labs"]
    listed_then = memories.page(0, 10, None, None, Selection(as_of=to_ms(between)))
    assert _texts(listed_then.memories) == ["I am vegetarian", "Works at Northwind Labs"]

    got = memories.get(old.id)
    assert (got.superseded_by, got.valid_until) == (new.id, clock.moment)
    assert [link.id for link in got.chain] == [old.id, new.id]
    assert [link.id for link in memories.get(new.id).chain] == [old.id, new.id]
    assert memories.get(work.id).chain[0].id == work.id


def test_as_of_is_half_open_at_the_moment_of_the_supersede(make_memories):
    clock = _clock()
    memories = make_memories(clock)
    before = clock.moment - timedelta(milliseconds=1)
    old = _add(memories, "Lives in Paris", _v(1)).memory
    clock.moment += timedelta(seconds=1)
    new = _add(memories, "Lives in Lisbon", _v(0, 1), supersedes=old.id).memory

    def at(moment, **extra):
        selection = Selection(as_of=to_ms(moment), **extra)
        return [m.id for m in memories.page(0, 10, "alice", None, selection).memories]

    assert at(before) == []  # nothing was kept yet
    assert at(old.valid_from) == [old.id]  # valid_from <= as_of
    assert at(new.valid_from - timedelta(milliseconds=1)) == [old.id]
    assert at(new.valid_from) == [new.id]  # as_of < valid_until: the old one ends here
    assert at(new.valid_from + timedelta(days=1)) == [new.id]
    assert sorted(at(new.valid_from, include_superseded=True)) == sorted([old.id, new.id])
    for moment in (old.valid_from, new.valid_from):
        hits = _search(memories, "lives", as_of=moment)
        assert [m.id for m in hits] == at(moment)
    assert at(new.expires_at) == []  # expired by then: as_of < expires_at
    assert at(new.expires_at - timedelta(milliseconds=1)) == [new.id]


def test_a_superseding_memory_is_never_dropped_as_a_duplicate_of_the_one_it_replaces(
    make_memories,
):
    memories = make_memories()
    old = _add(memories, "I never eat meat or fish", _v(1)).memory
    plain = _add(memories, "I never eat meat, but I eat fish", _v(1))
    assert plain.duplicate and plain.memory.id == old.id  # a plain add is deduplicated
    kept = _add(memories, "I never eat meat, but I eat fish", _v(1), supersedes=old.id)
    assert not kept.duplicate
    assert [m.text for m in memories.page(0, 10, "alice", None).memories] == [
        "I never eat meat, but I eat fish"
    ]
    # A plain add is deduplicated against current memories only, never a superseded one.
    again = _add(memories, "I never eat meat or fish", _v(1))
    assert again.duplicate and again.memory.id == kept.memory.id


def test_a_superseding_memory_that_repeats_another_current_one_is_kept_too(make_memories):
    memories = make_memories()
    tea = _add(memories, "Likes tea", _v(1)).memory
    coffee = _add(memories, "Likes coffee", _v(0, 1)).memory
    kept = _add(memories, "Likes tea", _v(1), supersedes=coffee.id)
    assert not kept.duplicate and kept.superseded == coffee.id
    assert _texts(memories.page(0, 10, "alice", None).memories) == ["Likes tea", "Likes tea"]
    assert memories.get(tea.id).valid_until is None


# --- refusals store nothing -------------------------------------------------------------------


def test_superseding_an_unknown_another_actors_or_a_superseded_memory_stores_nothing(
    make_memories,
):
    memories = make_memories()
    old = _add(memories, "Lives in Paris", _v(1)).memory
    bobs = _add(memories, "Bob lives in Rome", _v(0, 1), actor="bob").memory
    nobodys = memories.add(MemoryIn(text="A shared note", vector=_v(0, 0, 1))).memory
    newer = _add(memories, "Lives in Lisbon", _v(0, 0, 0, 1), supersedes=old.id).memory
    before = _snapshot(memories)
    cases = [
        ("mem_0123456789abcdef0123", "alice", SupersededNotFound, "does not exist"),
        (bobs.id, "alice", SupersedeActorMismatch, "belongs to another actor"),
        (nobodys.id, "alice", SupersedeActorMismatch, "belongs to another actor"),
        (old.id, "bob", SupersedeActorMismatch, "belongs to another actor"),
        (old.id, "alice", AlreadySuperseded, f"already superseded by '{newer.id}'"),
    ]
    for target, actor, error, message in cases:
        with pytest.raises(error, match=message) as raised:
            _add(memories, "Lives in Porto", _v(0, 0, 0, 0, 1), actor=actor, supersedes=target)
        assert raised.value.details == [
            {"field": "supersedes", "problem": raised.value.details[0]["problem"]}
        ]
        assert _snapshot(memories) == before, target
    assert memories.count() == 3  # Rome, the shared note, Lisbon


def test_an_expired_memory_cannot_be_superseded(make_memories):
    clock = _clock()
    memories = make_memories(clock, memory_ttl_seconds=60)
    old = _add(memories, "short lived", _v(1)).memory
    clock.moment += timedelta(seconds=61)
    with pytest.raises(SupersededNotFound):
        _add(memories, "newer", _v(0, 1), supersedes=old.id)
    assert memories.count() == 0


# --- concurrency ------------------------------------------------------------------------------


def test_concurrent_supersedes_of_one_memory_keep_exactly_one(make_memories):
    memories = make_memories()
    old = _add(memories, "I am vegetarian", _v(1)).memory
    start = threading.Barrier(8)

    def supersede(i: int) -> object:
        start.wait()
        try:
            return _add(memories, f"I eat fish now ({i})", _v(0, 1, i), supersedes=old.id)
        except AlreadySuperseded as exc:
            return exc

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(supersede, range(8)))  # any other error is raised here
    won = [o for o in outcomes if not isinstance(o, AlreadySuperseded)]
    refused = [o for o in outcomes if isinstance(o, AlreadySuperseded)]
    assert len(won) == 1 and len(refused) == 7
    assert all(e.code == "already_superseded" for e in refused)
    everything = memories.page(0, 20, "alice", None, Selection(include_superseded=True))
    assert everything.total == 2  # the losers stored nothing
    assert [m.id for m in memories.page(0, 20, "alice", None).memories] == [won[0].memory.id]
    assert memories.count() == 1


def test_the_count_of_current_diet_facts_is_never_zero_or_two_under_concurrent_supersedes(
    make_memories,
):
    """Writers keep superseding the current diet fact (racing one another), another keeps
    adding unrelated memories, and readers check all along, through a warm search, another
    container's search and the actor's listing, that exactly one diet fact is current."""
    memories = make_memories(dedupe_threshold=1.0)  # distinct texts: none is a duplicate
    other = make_memories.reopen(memories)  # another container, with a cache of its own
    rng = np.random.default_rng(3)
    lock = threading.Lock()

    def fresh() -> list[float]:
        with lock:
            return [float(x) for x in rng.standard_normal(DIM)]

    first = _add(memories, "diet: vegetarian", _v(1), topics=["diet"]).memory
    stop = threading.Event()
    kept = [first.id]

    def diet_facts(source: Memories, how: str) -> int:
        if how == "listing":
            listed = source.page(0, 100, "alice", None, Selection(topics=("diet",)))
            return len(listed.memories)
        return len(_search(source, "diet", "keyword", limit=50))

    def writer(n: int) -> None:
        for i in range(25):
            current = _search(memories, "diet", "keyword")
            target = next(m.id for m in current if m.text.startswith("diet:"))
            try:
                done = _add(
                    memories, f"diet: change {n}.{i}", fresh(), topics=["diet"], supersedes=target
                )
                kept.append(done.memory.id)
            except AlreadySuperseded:
                pass  # another writer replaced it first: read again

    def adder() -> None:
        for i in range(40):
            _add(memories, f"unrelated fact {i}", fresh())

    def reader(source: Memories, how: str) -> list[int]:
        counts = []
        while not stop.is_set():
            counts.append(diet_facts(source, how))
        return counts

    with ThreadPoolExecutor(7) as pool:
        readers = [
            pool.submit(reader, memories, "search"),
            pool.submit(reader, other, "search"),
            pool.submit(reader, other, "listing"),
        ]
        writers = [pool.submit(writer, n) for n in range(3)] + [pool.submit(adder)]
        try:
            for future in writers:
                future.result()  # a writer's error is raised here
        finally:
            stop.set()
        seen = [count for future in readers for count in future.result()]
    assert len(seen) > 30 and set(seen) == {1}, sorted(set(seen))
    history = memories.page(
        0, 100, "alice", None, Selection(include_superseded=True, topics=("diet",))
    )
    assert history.total == len(kept) > 3
    assert sum(m.valid_until is None for m in history.memories) == 1
    assert memories.count() == 1 + 40


# --- caches, chains, changes ------------------------------------------------------------------


def test_a_warm_container_sees_a_supersede_made_by_another_at_once(make_memories):
    here = make_memories()
    there = make_memories.reopen(here)
    old = _add(here, "Lives in Paris", _v(1)).memory
    assert [m.id for m in _search(here, "lives")] == [old.id]  # here's index is warm
    assert [m.id for m in _search(there, "lives")] == [old.id]
    new = _add(there, "Lives in Lisbon", _v(0, 1), supersedes=old.id).memory
    for mode in MODES:
        assert [m.id for m in _search(here, "lives", mode)] == [new.id], mode
    newest = _add(here, "Lives in Porto", _v(0, 0, 1), supersedes=new.id).memory
    assert [m.id for m in _search(there, "lives")] == [newest.id]
    assert [link.id for link in there.get(new.id).chain] == [old.id, new.id, newest.id]


def test_forgetting_any_memory_of_a_chain_forgets_the_whole_chain(make_memories, client):
    memories = make_memories()
    a = _add(memories, "one", _v(1)).memory
    b = _add(memories, "two", _v(0, 1), supersedes=a.id).memory
    c = _add(memories, "three", _v(0, 0, 1), supersedes=b.id).memory
    unrelated = _add(memories, "unrelated", _v(0, 0, 0, 1)).memory
    memories.delete(b.id)  # the middle one: older and newer go too
    for gone in (a, b, c):
        with pytest.raises(MemoryNotFound):
            memories.get(gone.id)
    all_kept = memories.page(0, 10, "alice", None, Selection(include_superseded=True))
    assert [m.id for m in all_kept.memories] == [unrelated.id]
    assert memories.count() == 1
    assert (
        sum(client.zcard(p.memories_superseded) for p in memories.store_keys.memory_partitions())
        == 0
    )
    assert _search(memories, "one two three", include_superseded=True) == []
    d = _add(memories, "four", _v(1)).memory
    e = _add(memories, "five", _v(0, 1), supersedes=d.id).memory
    memories.delete(e.id)  # the current one
    assert memories.count() == 1
    with pytest.raises(MemoryNotFound):
        memories.get(d.id)
    f = _add(memories, "six", _v(1)).memory
    _add(memories, "seven", _v(0, 1), supersedes=f.id)
    assert memories.delete_actor("alice") == 3  # every kept memory, superseded ones too
    assert memories.count() == 0
    assert memories.page(0, 10, None, None, Selection(include_superseded=True)).total == 0


def test_a_change_of_a_superseded_memory_keeps_it_superseded(make_memories):
    memories = make_memories()
    old = _add(memories, "Lives in Paris", _v(1)).memory
    new = _add(memories, "Lives in Lisbon", _v(0, 1), supersedes=old.id).memory
    changed = memories.patch(old.id, MemoryPatch(text="Lived in Paris", vector=_v(1, 0.1)))
    assert (changed.valid_until, changed.superseded_by) == (new.valid_from, new.id)
    assert [m.id for m in _search(memories, "Paris")] == []
    assert [m.id for m in _search(memories, "Paris", include_superseded=True)] == [old.id]
    assert memories.count() == 1


def test_a_change_racing_a_supersede_never_reopens_the_memory(make_memories):
    memories = make_memories(dedupe_threshold=1.0)  # distinct texts: none is a duplicate
    with ThreadPoolExecutor(2) as pool:
        for round_ in range(10):
            old = _add(memories, f"fact {round_}", _v(1, round_, 0, 0, 1)).memory
            start = threading.Barrier(2)

            def change(memory_id: str, n: int, start: threading.Barrier = start) -> None:
                start.wait()
                memories.patch(memory_id, MemoryPatch(importance=0.5, topics=[f"t{n}"]))

            def supersede(memory_id: str, n: int, start: threading.Barrier = start) -> None:
                start.wait()
                _add(memories, f"fact {n} again", _v(0, 1, n, 1), supersedes=memory_id)

            done = [pool.submit(change, old.id, round_), pool.submit(supersede, old.id, round_)]
            for future in done:
                future.result()
            got = memories.get(old.id)
            assert got.valid_until is not None and got.importance == 0.5  # both changes kept
    assert memories.count() == 10


# --- the general rule, by property ------------------------------------------------------------

_OPS = st.lists(
    st.tuples(st.sampled_from(["add", "supersede", "delete", "patch"]), st.integers(0, 30)),
    min_size=1,
    max_size=25,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_OPS)
def test_every_read_agrees_with_a_model_of_what_was_current_when(make_memories, ops):
    """Random adds, supersedes, deletes and changes (one millisecond apart, two actors); after
    them, listings, every search mode and counts match a plain model: current by default,
    everything kept with include_superseded, and for every moment of the run, what was current
    then with as_of."""
    clock = _clock()
    memories = make_memories(clock, dedupe_threshold=1.0)
    rng = np.random.default_rng(len(ops))
    model: dict[str, dict] = {}  # id -> {"actor", "start", "end", "text"}
    moments = []
    for op, pick in ops:
        clock.moment += timedelta(milliseconds=1)
        moments.append(to_ms(clock.moment))
        ids = sorted(model)
        current = [i for i in ids if model[i]["end"] is None]
        vector = [float(x) for x in rng.standard_normal(DIM)]
        actor = ("alice", "bob")[pick % 2]
        if op == "add" or not ids:
            kept = _add(memories, f"fact {len(model)} word", vector, actor=actor).memory
            model[kept.id] = {"actor": actor, "start": moments[-1], "end": None}
        elif op == "supersede":
            target = ids[pick % len(ids)]
            actor = model[target]["actor"]
            if model[target]["end"] is not None:
                with pytest.raises(AlreadySuperseded):
                    _add(memories, "never kept", vector, actor=actor, supersedes=target)
                continue
            kept = _add(
                memories, f"fact {len(model)} word", vector, actor=actor, supersedes=target
            ).memory
            model[target]["end"] = moments[-1]
            model[target]["next"] = kept.id
            model[kept.id] = {"actor": actor, "start": moments[-1], "end": None, "prev": target}
        elif op == "delete":
            target = ids[pick % len(ids)]
            chain, todo = set(), [target]
            while todo:
                memory_id = todo.pop()
                if memory_id in chain or memory_id not in model:
                    continue
                chain.add(memory_id)
                todo += [model[memory_id].get("prev"), model[memory_id].get("next")]
            memories.delete(target)
            for memory_id in chain:
                del model[memory_id]
        elif current:
            memories.patch(current[pick % len(current)], MemoryPatch(importance=0.5))

    def ids_of(views):
        return sorted(v.id for v in views)

    clock.moment += timedelta(milliseconds=1)
    for actor in ("alice", "bob"):
        mine = {i: m for i, m in model.items() if m["actor"] == actor}
        now_current = sorted(i for i, m in mine.items() if m["end"] is None)
        assert ids_of(memories.page(0, 100, actor, None).memories) == now_current
        every = memories.page(0, 100, actor, None, Selection(include_superseded=True))
        assert ids_of(every.memories) == sorted(mine)
        for mode in MODES:
            found = _search(memories, "word", mode, actor=actor, limit=100)
            assert ids_of(found) == now_current, mode
        for moment in moments:
            then = sorted(
                i
                for i, m in mine.items()
                if m["start"] <= moment and (m["end"] is None or moment < m["end"])
            )
            selection = Selection(as_of=moment)
            assert ids_of(memories.page(0, 100, actor, None, selection).memories) == then
            found = _search(
                memories, "word", "keyword", actor=actor, limit=100, as_of=from_ms(moment)
            )
            assert ids_of(found) == then
    assert memories.count() == sum(m["end"] is None for m in model.values())
    assert memories.page(0, 100, None, None).total == memories.count()
