"""Taking back a session's newest message (``Sessions.pop``) on a real server (and a cluster,
KIVIDB_TEST_CLUSTER=1): atomic under concurrency, the number given again, the extraction cursor
and a pending answer kept consistent, refused while a background run holds the session."""

from __future__ import annotations

import threading

import pytest
from cryptography.fernet import Fernet

from agent_memory.clock import SystemClock
from agent_memory.errors import SessionBusy, SessionNotFound
from agent_memory.providers.secrets import FernetCipher
from agent_memory.sessions.models import EventIn, EventsRequest
from agent_memory.sessions.records import SessionFields
from agent_memory.stores.models import StorePut
from agent_memory.stores.registry import Stores
from tests.support.common import unique
from tests.support.stores import sessions_of


def _events(*contents: str) -> EventsRequest:
    return EventsRequest(events=[EventIn(role="user", content=c) for c in contents])


@pytest.fixture
def store(client):
    stores = Stores(client, "db", FernetCipher(Fernet.generate_key()), SystemClock())
    name = unique("pop")
    config, _ = stores.put(name, StorePut(dimensions=3))
    yield config, sessions_of(stores, config)
    stores.delete(name)


def test_the_newest_message_comes_back_and_its_number_goes_to_the_next(store):
    _, sessions = store
    sessions.append("s", _events("one", "two", "three"))
    popped = sessions.pop("s")
    assert (popped.message.seq, popped.message.content, popped.message_count) == (3, "three", 2)
    assert sessions.append("s", _events("three again")).message_count == 3
    view = sessions.get("s", 50)
    assert [(m.seq, m.content) for m in view.messages] == [
        (1, "one"),
        (2, "two"),
        (3, "three again"),
    ]


def test_a_session_emptied_by_pops_answers_no_message_and_stays(store):
    _, sessions = store
    sessions.append("s", _events("only"))
    assert sessions.pop("s").message.content == "only"
    empty = sessions.pop("s")
    assert (empty.message, empty.message_count) == (None, 0)
    assert sessions.get("s", 50).message_count == 0
    with pytest.raises(SessionNotFound):
        sessions.pop("never-was")


def test_concurrent_pops_take_back_each_message_once(store):
    _, sessions = store
    contents = [f"m{i}" for i in range(40)]
    sessions.append("s", _events(*contents))
    taken: list[str | None] = []
    lock = threading.Lock()

    def pop_some() -> None:
        for _ in range(5):
            popped = sessions.pop("s")
            with lock:
                taken.append(popped.message.content if popped.message else None)

    threads = [threading.Thread(target=pop_some) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(t for t in taken if t is not None) == sorted(contents)
    assert taken.count(None) == 10
    assert sessions.get("s", 50).message_count == 0


def test_a_message_extraction_had_read_takes_the_cursor_back_with_it(store, client):
    config, sessions = store
    sessions.append("s", _events("a", "b", "c"))
    meta = config.keys().session("s").meta
    client.hset(meta, mapping={SessionFields.read_seq: 3})
    sessions.pop("s")
    assert sessions.get("s", 50).extraction.unread == 0  # read_seq followed: 2 of 2 read
    assert client.hget(meta, SessionFields.read_seq) == "2"
    sessions.append("s", _events("d"))
    assert sessions.get("s", 50).extraction.unread == 1  # the new message 3 is unread


def test_an_answer_pending_for_the_message_is_dropped(store, client):
    config, sessions = store
    sessions.append("s", _events("a", "b"))
    meta = config.keys().session("s").meta
    client.hset(meta, mapping={SessionFields.read_seq: 1, SessionFields.pending: '{"x": 1}'})
    sessions.pop("s")
    assert client.hget(meta, SessionFields.pending) is None
    # a message extraction had read, when the newest one was unread, keeps the cursor
    assert client.hget(meta, SessionFields.read_seq) == "1"


def test_a_session_a_background_run_holds_is_not_changed(store, client):
    config, sessions = store
    sessions.append("s", _events("a", "b"))
    client.set(config.keys().session("s").lock, "run-token", px=60_000)
    with pytest.raises(SessionBusy) as raised:
        sessions.pop("s")
    assert raised.value.code == "session_busy"
    assert [m.content for m in sessions.get("s", 50).messages] == ["a", "b"]
    client.delete(config.keys().session("s").lock)
    assert sessions.pop("s").message.content == "b"


def test_a_keyed_pop_or_append_sent_again_is_done_once_even_without_its_answer(store):
    """The once record is written by the write's own script: a second run of the same keyed
    request (the middleware's record freed after a 503 whose write was in fact done) changes
    nothing and answers as the first did."""
    from agent_memory.errors import IdempotencyKeyReused
    from agent_memory.stores.idempotency import OnceKey, key_digest

    _, sessions = store
    add = OnceKey(key_digest("add-1"), "f" * 64)
    first = sessions.append_events("s", _events("one", "two"), add).result
    again = sessions.append_events("s", _events("one", "two"), add).result
    assert first == again and first.message_count == 2
    with pytest.raises(IdempotencyKeyReused):
        sessions.append_events("s", _events("other"), OnceKey(add.digest, "e" * 64))
    take = OnceKey(key_digest("pop-1"), "a" * 64)
    popped = sessions.pop("s", take)
    assert sessions.pop("s", take) == popped and popped.message.content == "two"
    with pytest.raises(IdempotencyKeyReused):
        sessions.pop("s", OnceKey(take.digest, "b" * 64))
    assert [m.content for m in sessions.get("s", 50).messages] == ["one"]
    assert sessions.append("s", _events("three")).message_count == 2  # without a key: a write
