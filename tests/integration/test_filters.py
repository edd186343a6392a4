"""Filters on search, listing and recall, on a real Redis: topics (any of), metadata (equality
on top-level keys), time ranges on created_at and occurred_at, and types on recall. Filters
are applied before the top ``limit`` is cut, never after: a filter matching only the lowest
ranked memories still returns them, in every mode and in a compact index."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from cryptography.fernet import Fernet
from hypothesis import HealthCheck, given, settings, strategies as st

from agent_memory.clock import SystemClock, to_ms
from agent_memory.errors import ValidationFailed
from agent_memory.memories.models import MemoryFilters, MemoryIn, RecallRequest, SearchRequest
from agent_memory.memories.queries import selection_of
from agent_memory.memories.recall import recall
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
from tests.support.stores import sessions_of

DIM = 8
MODES = ("semantic", "keyword", "hybrid")
QUERY = [1.0] + [0.0] * (DIM - 1)


@pytest.fixture
def store(client, redis_url):
    stores = Stores(client, "db", FernetCipher(Fernet.generate_key()), SystemClock())
    name = unique("f")
    config, _ = stores.put(name, StorePut(dimensions=DIM, dedupe_threshold=1.0))
    binary = database_client(redis_url, binary=True)
    yield stores, config, binary
    stores.delete(name)


@pytest.fixture
def memories(client, store):
    _, config, binary = store
    return Memories(
        StoreDatabase(client, binary, config, SystemClock()), NoEmbedder(DIM), IndexCache(), "t"
    )


def _vector(closeness: float, rng) -> list[float]:
    """A unit vector whose cosine with QUERY is ``closeness``."""
    rest = rng.standard_normal(DIM - 1)
    rest *= np.sqrt(1 - closeness**2) / np.linalg.norm(rest)
    return [closeness, *map(float, rest)]


def _search(memories, mode, limit=5, **filters):
    return memories.search(
        SearchRequest(
            query="report", mode=mode, actor_id="alice", limit=limit, query_vector=QUERY, **filters
        )
    )


def _seed_low_ranked(memories, n=120, matching=6):
    """``n`` memories ranked by closeness to the query (semantic) and by how often they say
    "report" (keyword); only the ``matching`` worst of both carry the topic, the metadata and
    an event date."""
    rng = np.random.default_rng(1)
    when = datetime(2024, 5, 1, tzinfo=UTC)
    low = set()
    for i in range(n):
        worst = i >= n - matching
        closeness = 0.99 - i * 0.9 / n
        words = " ".join(["report"] * max(1, (n - i) // 10))
        kept = memories.add(
            MemoryIn(
                text=f"{words} number {i}",
                actor_id="alice",
                vector=_vector(closeness, rng),
                topics=["Billing"] if worst else ["other"],
                metadata={"team": "ops", "tier": 2} if worst else {"team": "sales", "tier": 2},
                occurred_at=when + timedelta(days=i) if worst else None,
            )
        ).memory
        if worst:
            low.add(kept.id)
    return low


@pytest.mark.parametrize("mode", MODES)
def test_filters_apply_before_the_limit_so_low_ranked_matches_still_come_back(memories, mode):
    low = _seed_low_ranked(memories)
    assert not low & {m.id for m in _search(memories, mode, limit=10)}  # unfiltered: top only
    for filters in (
        {"topics": ["billing"]},
        {"metadata": {"team": "ops"}},
        {"metadata": {"team": "ops", "tier": 2.0}},
        {"occurred_after": datetime(2024, 1, 1, tzinfo=UTC)},
    ):
        found = _search(memories, mode, limit=5, **filters)
        assert len(found) == 5 and {m.id for m in found} <= low, (mode, filters)
        assert {m.id for m in _search(memories, mode, limit=50, **filters)} == low


def test_a_compact_index_filters_before_its_candidates_too(memories, monkeypatch):
    import agent_memory.search.index as search

    monkeypatch.setattr(search, "COMPACT_ABOVE_BYTES", 256)  # compact from the first rows
    low = _seed_low_ranked(memories, n=80)
    for mode in MODES:
        found = _search(memories, mode, limit=6, topics=["BILLING"])
        assert {m.id for m in found} == low, mode


def test_metadata_matches_top_level_keys_by_json_equality(memories):
    rng = np.random.default_rng(2)

    def add(text, metadata):  # distinct vectors: none is a duplicate of another
        vector = _vector(0.5, rng)
        return memories.add(
            MemoryIn(text=f"report {text}", actor_id="alice", vector=vector, metadata=metadata)
        ).memory.id

    one = add("one", {"n": 1, "deep": {"a": 1, "b": [1, 2]}, "flag": True})
    two = add("two", {"n": 1.5, "flag": 1})
    three = add("three", {})

    def ids(**metadata):
        return {m.id for m in _search(memories, "keyword", limit=10, metadata=metadata)}

    assert ids(n=1.0) == {one}  # numbers by value
    assert ids(deep={"b": [1, 2], "a": 1}) == {one}  # objects whatever their key order
    assert ids(flag=True) == {one} and ids(flag=1) == {two}  # true is not 1
    assert ids(deep={"a": 1}) == set()  # equality, not containment
    assert ids(missing=None) == set()  # a missing key is not null
    assert ids(n=1, flag=True) == {one} and ids(n=1, flag=1) == set()
    assert three not in ids(n=1)


def test_time_ranges_are_half_open_and_unknown_event_times_never_match(memories):
    start = datetime.now(UTC).replace(microsecond=0)
    a = memories.add(
        MemoryIn(
            text="report a", actor_id="alice", vector=QUERY, occurred_at=start - timedelta(days=2)
        )
    ).memory
    time.sleep(0.003)  # kept in another millisecond (the precision of created_at)
    b = memories.add(
        MemoryIn(
            text="report b",
            actor_id="alice",
            vector=[0.0, 1.0] + [0.0] * 6,
            occurred_at=start - timedelta(days=1),
        )
    ).memory
    time.sleep(0.003)
    c = memories.add(
        MemoryIn(text="report c", actor_id="alice", vector=[0.0, 0.0, 1.0] + [0.0] * 5)
    ).memory

    def ids(**filters):
        return sorted(m.id for m in _search(memories, "keyword", limit=10, **filters))

    assert ids(occurred_after=a.occurred_at) == sorted([a.id, b.id])  # inclusive
    assert ids(occurred_before=b.occurred_at) == [a.id]  # exclusive
    assert ids(occurred_after=start - timedelta(days=5), occurred_before=start) == sorted(
        [a.id, b.id]
    )  # c has no event time
    assert ids(created_after=c.created_at) == [c.id]
    assert ids(created_before=b.created_at) == [a.id]
    assert ids(created_after=c.created_at, created_before=a.created_at) == []


def test_the_listing_takes_the_same_filters_and_counts_what_they_match(memories):
    low = _seed_low_ranked(memories, n=30, matching=4)
    for selection in (
        selection_of(MemoryFilters(topics="billing, nothing")),
        selection_of(MemoryFilters(metadata='{"team": "ops"}')),
        selection_of(MemoryFilters(occurred_after=datetime(2024, 1, 1, tzinfo=UTC))),
    ):
        page = memories.page(0, 2, "alice", None, selection)
        assert page.total == 4 and len(page.memories) == 2 and page.next_offset == 2
        rest = memories.page(2, 2, "alice", None, selection)
        assert {m.id for m in page.memories + rest.memories} == low
        store_wide = memories.page(0, 10, None, None, selection)
        assert {m.id for m in store_wide.memories} == low


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"topics": ""}, "query.topics"),
        ({"topics": ",".join(f"t{i}" for i in range(11))}, "query.topics"),
        ({"topics": "x" * 65}, "query.topics"),
        ({"metadata": "[1]"}, "query.metadata"),
        ({"metadata": '{"a": 1, "a": 2}'}, "query.metadata"),
        ({"metadata": "{bad"}, "query.metadata"),
        ({"metadata": '{"n": NaN}'}, "query.metadata"),
    ],
)
def test_listing_filters_that_cannot_be_read_are_refused_naming_the_parameter(given, field):
    with pytest.raises(ValidationFailed) as refused:
        MemoryFilters(**given)
    assert refused.value.details[0]["field"] == field


def test_recall_takes_types(client, store, memories):
    stores, config, _ = store
    sessions = sessions_of(stores, config)
    memories.add(MemoryIn(text="report fact", actor_id="alice", vector=QUERY))
    episode = memories.add(
        MemoryIn(
            text="report trip", actor_id="alice", type="episodic", vector=[0.0, 1.0] + [0.0] * 6
        )
    ).memory
    body = RecallRequest(session_id="s", actor_id="alice", query="report", types=["episodic"])
    assert [m.id for m in recall(sessions, memories, config, body).memories] == [episode.id]
    with pytest.raises(ValidationFailed, match="not one of this store's types"):
        recall(sessions, memories, config, body.model_copy(update={"types": ["nope"]}))
    with pytest.raises(ValidationFailed):  # checked even without an actor or a query
        recall(sessions, memories, config, RecallRequest(session_id="s", types=["nope"]))


# --- the general rule, by property ------------------------------------------------------------

TOPICS = ["a", "B", "c"]
_ITEMS = st.lists(
    st.tuples(
        st.lists(st.sampled_from(TOPICS), max_size=2, unique=True),
        st.dictionaries(
            st.sampled_from(["k", "j"]), st.sampled_from([1, 1.0, 2, "x", True]), max_size=2
        ),
        st.one_of(st.none(), st.integers(0, 9)),
    ),
    min_size=1,
    max_size=12,
)
_FILTERS = st.fixed_dictionaries(
    {},
    optional={
        "topics": st.lists(st.sampled_from([*TOPICS, "b", "z"]), min_size=1, max_size=2),
        "metadata": st.dictionaries(
            st.sampled_from(["k", "j"]), st.sampled_from([1, 2, "x"]), min_size=1, max_size=2
        ),
        "occurred_after": st.integers(0, 9),
        "occurred_before": st.integers(0, 9),
    },
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(items=_ITEMS, filters=_FILTERS)
def test_search_and_listing_return_exactly_what_the_filters_describe(memories, items, filters):
    """Random memories and filters: every mode of search (with a limit above the count) and
    the listing return exactly the memories a plain reading of the filters selects."""
    memories.delete_actor("alice")
    base = datetime(2024, 1, 1, tzinfo=UTC)
    rng = np.random.default_rng(len(items))
    kept = {}
    for topics, metadata, day in items:
        occurred = base + timedelta(days=day) if day is not None else None
        memory = memories.add(
            MemoryIn(
                text="report",
                actor_id="alice",
                vector=_vector(0.5, rng),
                topics=topics,
                metadata=metadata,
                occurred_at=occurred,
            )
        ).memory
        kept[memory.id] = (topics, metadata, day)
    asked = dict(filters)
    for name in ("occurred_after", "occurred_before"):
        if name in asked:
            asked[name] = base + timedelta(days=asked[name])

    def wanted(topics, metadata, day):
        if "topics" in filters and not {t.casefold() for t in topics} & {
            t.casefold() for t in filters["topics"]
        }:
            return False
        for key, value in filters.get("metadata", {}).items():
            if key not in metadata or metadata[key] != value or type(metadata[key]) is bool:
                return False
        if ("occurred_after" in filters or "occurred_before" in filters) and day is None:
            return False
        if "occurred_after" in filters and day < filters["occurred_after"]:
            return False
        return not ("occurred_before" in filters and day >= filters["occurred_before"])

    expected = {i for i, item in kept.items() if wanted(*item)}
    for mode in MODES:
        assert {m.id for m in _search(memories, mode, limit=50, **asked)} == expected, mode
    selection = Selection(
        topics=tuple(filters["topics"]) if "topics" in filters else None,
        metadata=tuple(filters["metadata"].items()) if "metadata" in filters else None,
        occurred_after=to_ms(asked["occurred_after"]) if "occurred_after" in asked else None,
        occurred_before=to_ms(asked["occurred_before"]) if "occurred_before" in asked else None,
    )
    listed = memories.page(0, 100, "alice", None, selection)
    assert {m.id for m in listed.memories} == expected and listed.total == len(expected)
