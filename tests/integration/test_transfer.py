"""Export and import of a store (``session_transfer``, ``memory_transfer``), from a single node
to a Redis Cluster: the whole state read back field by field, idempotence, and the refusals
(with proof that nothing changed)."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from cryptography.fernet import Fernet
from pydantic import ValidationError

from agent_memory.clock import SystemClock, to_ms
from agent_memory.database.keys import StoreKeys, actor_tag
from agent_memory.errors import (
    ActorMismatch,
    Conflict,
    ImportBusy,
    SessionNotFound,
    ValidationFailed,
)
from agent_memory.memories.models import MemoryIn, MemoryPatch, SearchRequest
from agent_memory.memories.service import Memories
from agent_memory.memories.transfer import MemoryTransfer
from agent_memory.memories.transfer_models import MemoryImportBatch
from agent_memory.providers.embeddings import NoEmbedder
from agent_memory.providers.secrets import FernetCipher
from agent_memory.search.cache import IndexCache
from agent_memory.sessions.models import EventIn, EventsRequest
from agent_memory.sessions.transfer import SessionImport, SessionTransfer
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.models import StorePut
from agent_memory.stores.registry import Stores
from local.bootstrap import Cluster, start_redis_cluster
from tests.support.clocks import MovableClock
from tests.support.common import unique
from tests.support.databases import database_client
from tests.support.stores import sessions_of

DIM = 4
SETTINGS = {"dimensions": DIM, "summarize_after": 20, "keep_recent": 4, "dedupe_threshold": 1.0}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    started = start_redis_cluster(tmp_path_factory.mktemp("transfer-cluster"))
    try:
        yield started
    finally:
        started.stop()


class Side:
    """A store on one database, with everything the tests use."""

    def __init__(self, url: str, name: str, clock=None) -> None:
        self.client = database_client(url)
        self.binary = database_client(url, binary=True)
        self.clock = clock or SystemClock()
        self.stores = Stores(self.client, "db", FernetCipher(Fernet.generate_key()), self.clock)
        self.name = name
        self.config, _ = self.stores.put(name, StorePut(**SETTINGS))
        self.reload()

    def reload(self) -> None:
        self.config = self.stores.get(self.name)
        self.sessions = sessions_of(self.stores, self.config)
        self.memories = Memories(
            StoreDatabase(self.client, self.binary, self.config, self.clock),
            NoEmbedder(DIM),
            IndexCache(),
            "transfer",
        )
        self.session_transfer = SessionTransfer(
            StoreDatabase(self.client, self.client, self.config, self.clock)
        )
        self.memory_transfer = MemoryTransfer(
            StoreDatabase(self.client, self.binary, self.config, self.clock)
        )

    def keys(self) -> StoreKeys:
        return self.config.keys()

    def export(self) -> tuple[dict, dict]:
        """Every session (all messages) and every memory, as the export routes give them."""
        sessions, cursor = {}, None
        while True:
            page = self.session_transfer.ids(cursor, 7)
            for session_id in page.session_ids:
                state, after = None, 0
                while True:
                    part = self.session_transfer.export(session_id, after, 3)
                    if state is None:
                        state = part.model_dump()
                    else:
                        state["messages"] += part.model_dump()["messages"]
                    if part.next_after_seq is None:
                        break
                    after = part.next_after_seq
                state.pop("next_after_seq")
                sessions[session_id] = state
            cursor = page.next_cursor
            if cursor is None:
                break
        memories, cursor = {}, None
        while True:
            page = self.memory_transfer.export(cursor, 2)
            for memory in page.memories:
                memories[memory.id] = memory.model_dump()
            cursor = page.next_cursor
            if cursor is None:
                break
        return sessions, memories

    def delete(self) -> None:
        self.stores.delete(self.name)


def _vector(i: int) -> list[float]:
    return [float(np.cos(i)), float(np.sin(i)), 0.3, 0.1 * (i % 3)]


def _fill(side: Side) -> dict[str, str]:
    """Sessions in every state and memories of every kind; returns some ids by role."""
    sessions, memories = side.sessions, side.memories
    for i in range(5):
        events = [EventIn(role="user", content=f"turn {i} {n} 🚀", name="Ann") for n in range(2)]
        sessions.append(f"chat-{i}", EventsRequest(actor_id=f"user-{i % 2}", events=events))
    long = [EventIn(role="assistant", content=f"line {n}") for n in range(30)]
    sessions.append("long:one@x", EventsRequest(actor_id="user-1", events=long))
    # extraction read 24 messages and summarization folded 18 of them (as its scripts do)
    meta = side.keys().session("long:one@x")
    side.client.hset(
        meta.meta,
        mapping={
            "read_seq": 24,
            "folded_seq": 18,
            "summary": "The assistant counted lines.",
            "failures": 2,
            "last_error": "the model answered 503",
            "last_run_at": to_ms(side.clock.now()),
            "pending": '{"from": 25, "to": 30, "memories": [{"text": "x", "type": "semantic", '
            '"topics": ["t"], "supersedes": null, "occurred_at": null, "messages": [26]}]}',
        },
    )
    side.client.zremrangebyscore(meta.messages, "-inf", 18)
    ids = {}
    kept = memories.add(
        MemoryIn(
            text="Prefers tea",
            actor_id="user-0",
            topics=["drinks"],
            importance=0.4,
            confidence=0.9,
            metadata={"crm": {"id": 7}},
            vector=_vector(1),
        ),
        source_session="chat-0",
    )
    ids["old"] = kept.memory.id
    newer = memories.add(
        MemoryIn(
            text="Prefers coffee now", actor_id="user-0", supersedes=ids["old"], vector=_vector(2)
        )
    )
    ids["new"] = newer.memory.id
    patched = memories.add(
        MemoryIn.model_validate(
            {
                "text": "Deploys on Fridays",
                "actor_id": "user-1",
                "vector": _vector(3),
                "occurred_at": "2025-05-08T13:56:00Z",
            }
        )
    )
    memories.patch(patched.memory.id, MemoryPatch(text="Deploys on Thursdays", vector=_vector(4)))
    ids["patched"] = patched.memory.id
    ids["no_actor"] = memories.add(MemoryIn(text="Office closes at 6", vector=_vector(5))).memory.id
    for i in range(7):
        memories.add(MemoryIn(text=f"fact {i}", actor_id=f"many-{i % 3}", vector=_vector(10 + i)))
    return ids


@pytest.fixture
def source(redis_url) -> Iterator[Side]:
    side = Side(redis_url, unique("src"))
    yield side
    side.delete()


@pytest.fixture
def target(cluster) -> Iterator[Side]:
    side = Side(cluster.url, unique("dst"))
    yield side
    side.delete()


def _import(sessions: dict, memories: dict, target: Side, page: int = 4) -> int:
    added = 0
    for session_id, state in sessions.items():
        messages = state["messages"]
        body = {k: v for k, v in state.items() if k not in ("session_id", "messages")}
        for start in range(0, max(len(messages), 1), page):
            chunk = {**body, "messages": messages[start : start + page]}
            part = SessionImport.model_validate(chunk, strict=False)
            added += target.session_transfer.import_page(session_id, part).result.messages_added
    rows = list(memories.values())
    for start in range(0, len(rows), 3):
        batch = MemoryImportBatch.model_validate(
            {"memories": rows[start : start + 3]}, strict=False
        )
        target.memory_transfer.import_batch(batch)
    return added


def test_a_store_moves_from_a_single_node_to_a_cluster_field_by_field(source, target):
    ids = _fill(source)
    sessions, memories = source.export()
    assert sorted(sessions) == sorted([f"chat-{i}" for i in range(5)] + ["long:one@x"])
    assert len(memories) == 11 and memories[ids["old"]]["superseded_by"] == ids["new"]
    assert [m["seq"] for m in sessions["long:one@x"]["messages"]] == list(range(19, 31))
    added = _import(sessions, memories, target)
    assert added == sum(len(s["messages"]) for s in sessions.values())
    moved_sessions, moved_memories = target.export()
    assert moved_sessions == sessions
    assert moved_memories == memories
    # and through the routes' own reads: counts, listings, a chain, versions, search
    assert target.sessions.count() == source.sessions.count() == 6
    assert target.memories.count() == source.memories.count() == 10  # one is superseded
    view = target.sessions.get("long:one@x", recent=50)
    assert view.summary == "The assistant counted lines." and view.message_count == 30
    assert (view.extraction.unread, view.extraction.last_error) == (6, "the model answered 503")
    got = target.memories.get(ids["new"])
    assert [link.id for link in got.chain] == [ids["old"], ids["new"]]
    assert target.memories.get(ids["patched"]).versions[0].text == "Deploys on Fridays"
    assert target.memories.get(ids["old"]).source.session_id == "chat-0"
    listed = [m.id for m in target.memories.page(0, 100, None, None).memories]
    assert listed == [m.id for m in source.memories.page(0, 100, None, None).memories]
    query = SearchRequest(query="coffee", mode="hybrid", actor_id="user-0", query_vector=_vector(2))
    assert [(m.id, round(m.score, 6)) for m in target.memories.search(query)] == [
        (m.id, round(m.score, 6)) for m in source.memories.search(query)
    ]
    # the vectors are the same bytes
    blob = target.binary.hget(target.keys().actor("user-0").vectors, ids["new"])
    assert blob == source.binary.hget(source.keys().actor("user-0").vectors, ids["new"])


def test_importing_twice_keeps_one_copy_and_moves_nothing_back(source, target):
    _fill(source)
    sessions, memories = source.export()
    _import(sessions, memories, target, page=1000)
    once = target.export()
    assert _import(sessions, memories, target, page=5) == 0  # every message was there already
    assert target.export() == once
    assert target.sessions.count() == 6 and target.memories.count() == 10
    # the target went on (an append, an extraction run): an import of the old state keeps it
    target.sessions.append("chat-0", EventsRequest(events=[EventIn(role="user", content="new")]))
    target.client.hset(target.keys().session("chat-0").meta, "read_seq", 3)
    _import({"chat-0": sessions["chat-0"]}, {}, target)
    after = target.session_transfer.export("chat-0", 0, 100)
    assert (after.message_count, after.read_seq) == (3, 3)
    assert [m.content for m in after.messages][-1] == "new"


def test_a_session_id_held_by_another_session_or_a_seq_by_another_message_is_a_409(source, target):
    _fill(source)
    sessions, _ = source.export()
    target.sessions.append("chat-1", EventsRequest(events=[EventIn(role="user", content="mine")]))
    before = target.export()
    state = {k: v for k, v in sessions["chat-1"].items() if k != "session_id"}
    with pytest.raises(Conflict, match="is another session"):
        target.session_transfer.import_page("chat-1", SessionImport.model_validate(state))
    _import({"chat-2": sessions["chat-2"]}, {}, target)
    before = target.export()
    changed = {**sessions["chat-2"]}
    changed["messages"] = [{**changed["messages"][0], "content": "not what was said"}]
    body = SessionImport.model_validate({k: v for k, v in changed.items() if k != "session_id"})
    with pytest.raises(Conflict, match="Message 1 of session 'chat-2' is another message"):
        target.session_transfer.import_page("chat-2", body)
    assert target.export() == before
    # the same session again, said to be another actor's: refused as such an append is
    held = sessions["chat-2"]["actor_id"]
    other = {k: v for k, v in sessions["chat-2"].items() if k != "session_id"}
    other["actor_id"] = "someone-else"
    with pytest.raises(ActorMismatch) as refused:
        target.session_transfer.import_page("chat-2", SessionImport.model_validate(other))
    assert refused.value.code == "actor_mismatch" and f"belongs to actor '{held}'" in str(
        refused.value.message
    )
    assert target.export() == before


def test_bad_imports_are_refused_whole_with_the_exact_problems_and_change_nothing(source, target):
    ids = _fill(source)
    _, memories = source.export()
    good = memories[ids["patched"]]
    before = target.export()
    bad = [
        {**good, "id": "mem_00000000000000000001", "type": "opinion"},
        {**good, "id": "mem_00000000000000000002", "vector": base64.b64encode(b"\0" * 16).decode()},
        {**good, "id": "mem_00000000000000000003", "vector": "not base64!"},
        {**good, "id": "mem_00000000000000000004", "vector": base64.b64encode(b"\1" * 12).decode()},
        {
            **good,
            "id": "mem_00000000000000000005",
            "vector": base64.b64encode(np.array([np.nan, 1, 0, 0], "<f4").tobytes()).decode(),
        },
        {**good, "id": "mem_00000000000000000006", "expires_at": "8999-01-01T00:00:00Z"},
        good,
    ]
    with pytest.raises(ValidationFailed) as refused:
        target.memory_transfer.import_batch(
            MemoryImportBatch.model_validate({"memories": bad}, strict=False)
        )
    assert refused.value.details == [
        {"field": "memories.0.type", "problem": "must be one of: episodic, semantic"},
        {"field": "memories.1.vector", "problem": "must not be all zeros"},
        {"field": "memories.2.vector", "problem": "must be base64 of little-endian float32 values"},
        {"field": "memories.3.vector", "problem": "expected 4 dimensions, got 3"},
        {"field": "memories.4.vector", "problem": "values must be finite"},
        {
            "field": "memories.5.expires_at",
            "problem": "must be at most 315360000 s (the largest "
            "memory_ttl_seconds) and a day from now",
        },
    ]
    assert target.export() == before
    session = {k: v for k, v in source.export()[0]["chat-1"].items() if k != "session_id"}
    forever = SessionImport.model_validate({**session, "expires_at": "8999-01-01T00:00:00Z"})
    with pytest.raises(ValidationFailed, match="further away than any store keeps a session"):
        target.session_transfer.import_page("chat-1", forever)
    assert target.export() == before
    for broken, problem in [
        ({**good, "id": "mem_x"}, "String should match pattern"),
        ({**good, "updated_at": "2000-01-01T00:00:00Z"}, "must not be before created_at"),
        ({**memories[ids["old"]], "superseded_by": None}, "valid_until and superseded_by"),
    ]:
        with pytest.raises(ValidationError, match=problem):
            MemoryImportBatch.model_validate({"memories": [broken]}, strict=False)
    with pytest.raises(ValidationError, match="at most 100 items"):
        MemoryImportBatch.model_validate({"memories": [good] * 101}, strict=False)
    session = {k: v for k, v in source.export()[0]["long:one@x"].items() if k != "session_id"}
    with pytest.raises(ValidationError, match=r"messages.0.seq\n  must lie from folded_seq \+ 1"):
        SessionImport.model_validate(
            {**session, "messages": [{**session["messages"][0], "seq": 3}]}
        )
    with pytest.raises(ValidationError, match=r"folded_seq\n  must be at most read_seq \(10\)"):
        SessionImport.model_validate({**session, "read_seq": 10})
    assert target.export() == before


def test_what_has_expired_is_neither_exported_nor_imported(redis_url, target):
    past = MovableClock()
    past.moment -= timedelta(days=400)  # the default memory TTL is 365 days
    old = Side(redis_url, unique("old"), clock=past)
    try:
        kept = old.memories.add(MemoryIn(text="long ago", actor_id="a", vector=_vector(1)))
        assert old.memory_transfer.export(None, 10).memories  # alive for that clock
        old.clock = SystemClock()
        old.reload()
        assert old.memory_transfer.export(None, 10).memories == []
        old.clock = past
        old.reload()
        (memory,) = old.memory_transfer.export(None, 10).memories
        result = target.memory_transfer.import_batch(
            MemoryImportBatch.model_validate({"memories": [memory.model_dump()]}, strict=False)
        )
        assert (result.imported, result.expired) == (0, [kept.memory.id])
        assert target.memories.count() == 0
        with pytest.raises(SessionNotFound):
            target.session_transfer.export("nothing", 0, 10)
        day = "2020-01-01T00:00:00Z"
        expired = {
            "message_count": 1,
            "created_at": day,
            "last_event_at": day,
            "expires_at": "2020-01-02T00:00:00Z",
        }
        with pytest.raises(ValidationFailed, match="expires_at has passed"):
            target.session_transfer.import_page("late", SessionImport.model_validate(expired))
        assert to_ms(SystemClock().now()) > 0 and target.sessions.count() == 0
    finally:
        old.delete()


def _imported_memory(**fields) -> dict:
    """An exported memory's fields, with ``fields`` changed."""
    vector = base64.b64encode(np.array([1, 0, 0, 0], "<f4").tobytes()).decode()
    day = "2026-01-01T00:00:00Z"
    return {
        "id": "mem_0000000000000000000a",
        "text": "Prefers tea",
        "actor_id": "ann",
        "created_at": day,
        "updated_at": day,
        "expires_at": "2030-01-01T00:00:00Z",
        "vector": vector,
        **fields,
    }


@pytest.mark.parametrize("text", ["\u200b\u200b", "\u2060", "\u3164", " \ufe0f "])
def test_a_text_that_shows_nothing_is_refused_as_post_memories_refuses_it(text):
    version = {"text": text, "type": "semantic", "changed_at": "2026-01-01T00:00:00Z"}
    for body in (_imported_memory(text=text), _imported_memory(versions=[version])):
        with pytest.raises(ValidationError, match="must not be blank"):
            MemoryImportBatch.model_validate({"memories": [body]}, strict=False)
    with pytest.raises(ValidationError, match="must not be blank"):
        MemoryIn.model_validate({"text": text})


@pytest.fixture
def plain(redis_url) -> Iterator[Side]:
    """A store on a single node, with a clock the test moves."""
    side = Side(redis_url, unique("imp"), clock=MovableClock())
    yield side
    side.delete()


def _batch(*memories: dict) -> MemoryImportBatch:
    return MemoryImportBatch.model_validate({"memories": list(memories)}, strict=False)


def _search(side: Side, actor_id: str) -> list[tuple[str, str]]:
    query = SearchRequest(query="tea", mode="keyword", actor_id=actor_id)
    return [(m.id, m.text) for m in side.memories.search(query)]


def test_an_id_given_twice_in_a_batch_is_refused_and_nothing_is_written(plain):
    ann = _imported_memory(actor_id="ann", text="Ann likes tea")
    bob = _imported_memory(actor_id="bob", text="Bob likes tea")
    with pytest.raises(ValidationFailed) as refused:
        plain.memory_transfer.import_batch(_batch(ann, bob))
    assert refused.value.details == [
        {"field": "memories.1.id", "problem": "the batch gives this id already, as memories.0.id"}
    ]
    assert plain.export() == ({}, {})


def test_an_id_of_another_actors_live_memory_is_a_409_and_its_memory_stays_whole(plain):
    plain.memory_transfer.import_batch(_batch(_imported_memory(actor_id="ann", text="Ann tea")))
    before = plain.export()
    other = _imported_memory(id="mem_0000000000000000000b", actor_id="bob", text="Bob tea")
    moved = _imported_memory(actor_id="bob", text="Bob likes tea")
    with pytest.raises(Conflict, match="another actor's memory") as refused:
        plain.memory_transfer.import_batch(_batch(other, moved))
    assert refused.value.details[0]["field"] == "memories.1.id"
    assert plain.export() == before  # not even the other memory of the batch
    assert _search(plain, "bob") == []
    plain.memories.delete("mem_0000000000000000000a")
    assert _search(plain, "ann") == [] and plain.export() == ({}, {})
    # the same actor's id is written again, the same
    plain.memory_transfer.import_batch(_batch(_imported_memory(actor_id="ann", text="Ann tea")))
    plain.memory_transfer.import_batch(_batch(_imported_memory(actor_id="ann", text="Ann tea")))
    assert _search(plain, "ann") == [("mem_0000000000000000000a", "Ann tea")]


def test_an_id_whose_other_actors_memory_expired_moves_whole_to_the_new_actor(plain):
    soon = (plain.clock.now() + timedelta(hours=1)).isoformat()
    plain.memory_transfer.import_batch(
        _batch(_imported_memory(actor_id="ann", text="Ann tea", expires_at=soon))
    )
    plain.clock.moment += timedelta(hours=2)
    plain.reload()
    plain.memory_transfer.import_batch(_batch(_imported_memory(actor_id="bob", text="Bob tea")))
    assert _search(plain, "bob") == [("mem_0000000000000000000a", "Bob tea")]
    assert plain.client.hkeys(plain.keys().actor("ann").memories) == []
    plain.memories.delete("mem_0000000000000000000a")
    assert plain.export() == ({}, {}) and _search(plain, "ann") == []


def _session(**fields) -> dict:
    day = "2026-01-01T00:00:00Z"
    message = {"seq": 1, "role": "user", "content": "hi", "created_at": day}
    soon = (datetime.now(UTC) + timedelta(days=30)).isoformat()  # within any session TTL
    return {
        "message_count": 1,
        "created_at": day,
        "last_event_at": day,
        "expires_at": soon,
        "messages": [message],
        **fields,
    }


@pytest.mark.parametrize(
    "fields",
    [
        {"message_count": 10**30, "messages": []},
        {"message_count": 2**63, "messages": []},
        {"message_count": 10**15 + 1, "messages": []},
        {"message_count": 3, "read_seq": 10**16, "messages": []},
        {
            "message_count": 10**20,
            "messages": [
                {
                    "seq": 10**20,
                    "role": "user",
                    "content": "x",
                    "created_at": "2026-01-01T00:00:00Z",
                }
            ],
        },
    ],
)
def test_a_sequence_number_beyond_what_the_scripts_hold_exactly_is_refused(fields):
    with pytest.raises(ValidationError, match="less than or equal to 1000000000000000"):
        SessionImport.model_validate(_session(**fields))


def test_the_largest_sequence_number_imported_still_takes_appends(plain):
    plain.session_transfer.import_page(
        "far", SessionImport.model_validate(_session(message_count=10**15, messages=[]))
    )
    appended = plain.sessions.append(
        "far", EventsRequest(events=[EventIn(role="user", content="x")])
    )
    assert appended.message_count == 10**15 + 1
    assert [m.seq for m in plain.session_transfer.export("far", 0, 10).messages] == [10**15 + 1]


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ({"first_seq": 5, "last_seq": 2}, "needs first_seq <= last_seq"),
        ({"first_seq": 2, "last_seq": 5, "seqs": [3, 9]}, "seqs 9 is outside"),
        ({"first_seq": 2, "last_seq": 5, "seqs": [1]}, "seqs 1 is outside"),
        ({"first_seq": 1, "last_seq": 10**16}, "less than or equal to 1000000000000000"),
    ],
)
def test_a_memory_source_that_extraction_could_not_have_written_is_refused(source, problem):
    body = _imported_memory(source={"session_id": "chat", **source})
    with pytest.raises(ValidationError, match=problem):
        MemoryImportBatch.model_validate({"memories": [body]}, strict=False)


def test_a_tagged_id_is_claimed_by_its_actor_alone_and_moves_once_it_expired(plain):
    """An id carrying its actor's tag has no owner entry; another actor's import of it is
    still refused while it lives, and takes it over (with an owner entry) once it expired."""
    tagged = "mem_" + actor_tag("ann") + "000000000000000a"
    soon = (plain.clock.now() + timedelta(hours=1)).isoformat()
    plain.memory_transfer.import_batch(
        _batch(_imported_memory(id=tagged, actor_id="ann", text="Ann tea", expires_at=soon))
    )
    owners = plain.keys().memory_partition(tagged).memory_owners
    assert plain.client.hget(owners, tagged) is None
    assert plain.memories.get(tagged).actor_id == "ann"
    with pytest.raises(Conflict, match="another actor's memory"):
        plain.memory_transfer.import_batch(
            _batch(_imported_memory(id=tagged, actor_id="bob", text="Bob tea"))
        )
    plain.clock.moment += timedelta(hours=2)
    plain.reload()
    plain.memory_transfer.import_batch(
        _batch(_imported_memory(id=tagged, actor_id="bob", text="Bob tea"))
    )
    assert plain.client.hget(owners, tagged) == "bob"
    assert plain.client.hkeys(plain.keys().actor("ann").memories) == []
    assert plain.memories.get(tagged).actor_id == "bob"
    assert _search(plain, "bob") == [(tagged, "Bob tea")]
    plain.memories.delete(tagged)
    assert plain.export() == ({}, {})


def test_two_imports_of_one_id_under_two_actors_at_once_keep_it_under_one(plain):
    """Imports of one store run one at a time (its import lock), so that reading an id's owner
    and claiming it are one step: of two imports racing with one id under two actors, one is
    kept and the other is 409, and a DELETE of the id leaves no copy."""

    def run(actor: str, memory_id: str, start: threading.Barrier, results: list[str]) -> None:
        start.wait()
        batch = _batch(_imported_memory(id=memory_id, actor_id=actor, text=f"{actor} tea"))
        try:
            plain.memory_transfer.import_batch(batch)
            results.append(actor)
        except Conflict:
            results.append("409")

    for round_ in range(40):
        memory_id = "mem_" + actor_tag("ann") + format(round_, "016x")
        results: list[str] = []
        start = threading.Barrier(2)
        threads = [
            threading.Thread(target=run, args=(a, memory_id, start, results))
            for a in ("ann", "bob")
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        kept = [
            a
            for a in ("ann", "bob")
            if plain.binary.hexists(plain.keys().actor(a).memories, memory_id)
        ]
        assert sorted(results) in (["409", "ann"], ["409", "bob"]), results
        assert kept == [r for r in results if r != "409"]
        plain.memories.delete(memory_id)
        assert not any(
            plain.binary.hexists(plain.keys().actor(a).memories, memory_id) for a in ("ann", "bob")
        )


def test_an_import_waits_for_another_of_the_store_and_answers_503_past_the_wait(plain, monkeypatch):
    """A batch finds the store's import lock taken: it waits, and when the lock outlives the
    wait it is a 503 that changes nothing (the client retries it); the lock is the store's
    alone, and a lock its holder lost is never released by another import."""
    import agent_memory.memories.transfer as transfer

    monkeypatch.setattr(transfer, "IMPORT_LOCK_WAIT_SECONDS", 0.2)
    lock = plain.keys().memory_import_lock
    plain.client.set(lock, "someone-else", px=60_000)
    with pytest.raises(ImportBusy):
        plain.memory_transfer.import_batch(_batch(_imported_memory()))
    assert plain.export() == ({}, {})
    assert plain.client.get(lock) == "someone-else"  # not released by the refused import
    plain.client.pexpire(lock, 300)  # the holder's lock runs out while this one waits
    monkeypatch.setattr(transfer, "IMPORT_LOCK_WAIT_SECONDS", 5.0)
    assert plain.memory_transfer.import_batch(_batch(_imported_memory())).imported == 1
    assert plain.client.get(lock) is None
