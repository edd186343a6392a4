"""Working memory on a real Redis server: order under concurrency, actors, expiry, paging."""

import threading
from datetime import timedelta

import pytest
from cryptography.fernet import Fernet

from agent_memory.clock import SystemClock
from agent_memory.errors import ActorMismatch, PayloadTooLarge, SessionNotFound
from agent_memory.memories.models import RecallRequest
from agent_memory.memories.recall import EMPTY_CONTEXT, recall
from agent_memory.memories.service import Memories
from agent_memory.providers.embeddings import NoEmbedder
from agent_memory.providers.secrets import FernetCipher
from agent_memory.search.cache import IndexCache
from agent_memory.sessions.models import EventIn, EventsRequest
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.models import StorePut
from agent_memory.stores.registry import Stores
from tests.support.clocks import MovableClock
from tests.support.common import unique
from tests.support.databases import ON_CLUSTER, database_client
from tests.support.stores import sessions_of


def _memories(config):
    client = database_client(_URL[0])
    binary = database_client(_URL[0], binary=True)
    return Memories(
        StoreDatabase(client, binary, config, SystemClock()),
        NoEmbedder(config.dimensions),
        IndexCache(),
        "test",
    )


_URL: list[str] = []


@pytest.fixture(autouse=True)
def _remember_url(redis_url):
    _URL[:] = [redis_url]


def _events(*contents, actor=None):
    return EventsRequest(actor_id=actor, events=[EventIn(role="user", content=c) for c in contents])


@pytest.fixture
def make_store(client):
    made = []

    def make(clock=None, **settings):
        stores = Stores(client, "db", FernetCipher(Fernet.generate_key()), clock or SystemClock())
        name = unique("s")
        config, _ = stores.put(name, StorePut(**settings))
        made.append((stores, name))
        return config, sessions_of(stores, config)

    yield make
    for stores, name in made:
        stores.delete(name)


def test_append_numbers_messages_and_reads_them_back_oldest_first(make_store):
    _, sessions = make_store()
    assert sessions.append("s", _events("one", "two")).message_count == 2
    result = sessions.append("s", _events("three"))
    assert (result.added, result.message_count) == (1, 3)
    view = sessions.get("s", recent=50)
    assert [(m.seq, m.content) for m in view.messages] == [(1, "one"), (2, "two"), (3, "three")]
    assert [m.content for m in sessions.get("s", recent=2).messages] == ["two", "three"]


def test_eight_concurrent_writers_of_25_lose_nothing_and_keep_their_order(make_store):
    _, sessions = make_store()
    start = threading.Barrier(8)

    def writer(n: int) -> None:
        start.wait()
        for i in range(25):
            sessions.append("busy", _events(f"w{n}-{i:02d}"))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    view = sessions.get("busy", recent=1000)
    assert view.message_count == 200
    assert [m.seq for m in view.messages] == list(range(1, 201))
    contents = [m.content for m in view.messages]
    assert len(set(contents)) == 200
    for n in range(8):
        mine = [c for c in contents if c.startswith(f"w{n}-")]
        assert mine == [f"w{n}-{i:02d}" for i in range(25)]


def test_a_session_belongs_to_its_first_actor(make_store):
    _, sessions = make_store()
    sessions.append("s", _events("hi", actor="alice"))
    sessions.append("s", _events("no actor given is fine"))
    with pytest.raises(ActorMismatch):
        sessions.append("s", _events("intruder", actor="bob"))
    view = sessions.get("s", recent=50)
    assert view.actor_id == "alice" and view.message_count == 2


def test_a_session_without_actor_takes_the_first_actor_given(make_store):
    _, sessions = make_store()
    sessions.append("s", _events("anonymous"))
    sessions.append("s", _events("now known", actor="carol"))
    assert sessions.get("s", recent=5).actor_id == "carol"


def test_too_many_events_writes_nothing(make_store):
    _, sessions = make_store()
    with pytest.raises(PayloadTooLarge):
        sessions.append("s", _events(*[str(i) for i in range(101)]))
    with pytest.raises(SessionNotFound):
        sessions.get("s", recent=5)


TEXTS = [
    "héllo wörld",
    "👩‍👩‍👧‍👦 family, 🏳️‍🌈 flag, 👍🏽 tone",
    "e\u0301 composed vs é",
    "漢字かなカナ 한국어",
    'tab\tnewline\nquote" backslash\\ nul-free',
    "RTL مرحبا",
]


def test_unicode_reads_back_exactly(make_store):
    _, sessions = make_store()
    sessions.append("u", _events(*TEXTS))
    read = [m.content for m in sessions.get("u", recent=50).messages]
    assert read == TEXTS
    assert [t.encode("utf-8") for t in read] == [t.encode("utf-8") for t in TEXTS]


@pytest.mark.parametrize(
    "pair",
    [("team:a_b", "team_a:b"), ("team:a:b", "team:a_b"), ("ops:s1", "ops"), ("a@b.c", "a@b:c")],
)
def test_lookalike_session_ids_do_not_collide(make_store, pair):
    _, sessions = make_store()
    first, second = pair
    sessions.append(first, _events("first"))
    sessions.append(second, _events("second"))
    assert [m.content for m in sessions.get(first, recent=5).messages] == ["first"]
    assert [m.content for m in sessions.get(second, recent=5).messages] == ["second"]


def test_lookalike_store_and_session_pairs_do_not_collide(make_store):
    # acme.ops + s1 and acme + ops... cannot meet: ':' is not a store character.
    _, acme = make_store()
    _, acme_ops = make_store()
    acme.append("ops:s1", _events("in acme"))
    acme_ops.append("s1", _events("in acme.ops"))
    assert [m.content for m in acme.get("ops:s1", recent=5).messages] == ["in acme"]
    assert [m.content for m in acme_ops.get("s1", recent=5).messages] == ["in acme.ops"]


def test_sessions_expire_ttl_after_their_last_message(make_store):
    clock = MovableClock()
    _, sessions = make_store(clock, session_ttl_seconds=600)
    sessions.append("old", _events("early"))
    clock.moment += timedelta(seconds=300)
    sessions.append("new", _events("later"))
    clock.moment += timedelta(seconds=301)  # "old" is 601 s quiet, "new" 301 s
    assert [s.session_id for s in sessions.list(0, 20).sessions] == ["new"]
    assert sessions.count() == 1
    with pytest.raises(SessionNotFound):
        sessions.get("old", recent=5)
    # a new message revives nothing: it starts a new session under the same id
    sessions.append("old", _events("again"))
    view = sessions.get("old", recent=5)
    assert [m.content for m in view.messages] == ["again"] and view.message_count == 1
    assert sessions.count() == 2


def test_listing_is_most_recent_first_with_offset_paging(make_store):
    clock = MovableClock()
    _, sessions = make_store(clock)
    for i in range(5):
        sessions.append(f"s{i}", _events("x"))
        clock.moment += timedelta(seconds=1)
    sessions.append("s1", _events("touch"))  # s1 becomes the most recent
    first = sessions.list(0, 2)
    assert [s.session_id for s in first.sessions] == ["s1", "s4"]
    assert first.next_offset == 2
    second = sessions.list(2, 2)
    assert [s.session_id for s in second.sessions] == ["s3", "s2"]
    last = sessions.list(4, 2)
    assert [s.session_id for s in last.sessions] == ["s0"] and last.next_offset is None
    assert sessions.list(0, 5).next_offset is None


def test_the_listing_shows_each_sessions_extraction_as_reading_it_does(make_store, client):
    config, sessions = make_store(llm_provider="openai", llm_model="gpt-4o-mini")
    sessions.append("quiet", _events("one", "two"))
    sessions.append("busy", _events("three"))
    # A background run holds the session's lock while it works.
    lock = config.keys().session("busy").lock
    client.set(lock, "token", px=60_000)
    listed = {s.session_id: s.extraction for s in sessions.list(0, 10).sessions}
    assert listed["busy"].status == "running"
    assert listed["quiet"].status == "waiting" and listed["quiet"].unread == 2
    assert listed["quiet"].due_at is not None and listed["quiet"].last_error is None
    for session_id, extraction in listed.items():
        assert extraction == sessions.get(session_id, recent=1).extraction


def test_the_listing_does_not_read_the_summaries_it_does_not_show(make_store, client):
    config, sessions = make_store()
    summary = "s" * 8_000  # background_steps.MAX_SUMMARY_CHARS: a long-running session's summary
    for i in range(20):
        sessions.append(f"s{i}", _events("x"))
        client.hset(config.keys().session(f"s{i}").meta, "summary", summary)

    def sent() -> int:  # bytes the server has sent to its clients so far
        return int(client.info("stats")["total_net_output_bytes"])

    before = sent()
    listed = sessions.list(0, 20).sessions
    read = sent() - before
    assert len(listed) == 20 and "summary" not in listed[0].model_dump()
    assert read < 20 * len(summary) // 4  # without the summaries: about 2 KB here
    assert sessions.get("s0", recent=1).summary == summary  # a session's own read has it


def test_without_a_language_model_every_listed_session_is_idle_with_its_unread_count(make_store):
    _, sessions = make_store()
    sessions.append("s", _events("one", "two", "three"))
    (listed,) = sessions.list(0, 10).sessions
    assert (listed.extraction.status, listed.extraction.unread) == ("idle", 3)
    assert listed.extraction.due_at is None and listed.extraction.last_run_at is None


def test_delete_forgets_the_session(make_store):
    _, sessions = make_store()
    sessions.append("s", _events("x"))
    sessions.delete("s")
    with pytest.raises(SessionNotFound):
        sessions.get("s", recent=5)
    assert sessions.count() == 0
    with pytest.raises(SessionNotFound):
        sessions.delete("s")


def test_recall_before_the_first_events_is_empty_not_an_error(make_store):
    config, sessions = make_store()
    view = recall(
        sessions, _memories(config), config, RecallRequest(session_id="new", actor_id="u")
    )
    assert (view.summary, view.messages, view.memories) == (None, [], [])
    assert view.context == EMPTY_CONTEXT and view.actor_id == "u"


def test_recall_returns_at_most_summarize_after_newest_messages(make_store):
    config, sessions = make_store(summarize_after=5, keep_recent=2)
    sessions.append("s", _events(*[f"m{i}" for i in range(8)], actor="dana"))
    view = recall(sessions, _memories(config), config, RecallRequest(session_id="s"))
    assert [m.content for m in view.messages] == ["m3", "m4", "m5", "m6", "m7"]
    assert view.actor_id == "dana"
    assert view.context.endswith('user: "m7"')


@pytest.mark.parametrize("model", [False, True])
def test_recalls_window_moves_in_jumps_and_keeps_the_context_prefix_between(make_store, model):
    """A message a turn, no fold landing (none can here: no background runs): between two
    moves of the window each turn's context starts with the previous turn's whole; a store
    with a language model shows a fold's worth more while its fold is under way."""
    settings = {"summarize_after": 6, "keep_recent": 2}
    if model:
        settings |= {"llm_provider": "openai", "llm_model": "gpt-4o-mini"}
    config, sessions = make_store(**settings)
    most = 10 if model else 6
    previous, moves = None, 0
    for n in range(40):
        sessions.append("w", _events(f"turn {n}", actor="ann"))
        view = recall(sessions, _memories(config), config, RecallRequest(session_id="w"))
        seqs = [m.seq for m in view.messages]
        assert seqs[-1] == n + 1 and seqs == list(range(seqs[0], n + 2))
        assert len(seqs) == n + 1 if n < most else 3 <= len(seqs) <= 6
        if previous is not None and previous.messages[0].seq == seqs[0]:
            assert view.context.startswith(previous.context)
        elif previous is not None:
            moves += 1
            assert seqs[0] - previous.messages[0].seq in (4, 8)  # summarize_after - keep_recent
        previous = view
    assert moves <= 40 // 4


def test_deletes_racing_appends_leave_counts_listings_and_reads_in_agreement(make_store):
    _, sessions = make_store()
    errors: list[Exception] = []

    def run(call) -> None:
        try:
            call()
        except SessionNotFound:
            pass
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    for n in range(150):
        session_id = f"y{n}"
        if n % 2:
            sessions.append(session_id, _events("before"))
        racing_append = lambda s=session_id: sessions.append(s, _events("racing"))  # noqa: E731
        racing_delete = lambda s=session_id: sessions.delete(s)  # noqa: E731
        threads = [
            threading.Thread(target=run, args=(call,)) for call in (racing_append, racing_delete)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []
    readable = set()
    for n in range(150):
        try:
            sessions.get(f"y{n}", recent=5)
            readable.add(f"y{n}")
        except SessionNotFound:
            pass
    listed = {s.session_id for s in sessions.list(0, 100).sessions} | {
        s.session_id for s in sessions.list(100, 100).sessions
    }
    assert listed == readable
    assert sessions.count() == len(readable)


def test_a_session_appended_again_right_after_its_delete_is_listed_and_counted(make_store):
    clock = MovableClock()  # frozen: every step happens in the same millisecond
    _, sessions = make_store(clock)
    sessions.append("s", _events("first life"))
    sessions.delete("s")
    sessions.append("s", _events("second life"))
    assert [m.content for m in sessions.get("s", recent=5).messages] == ["second life"]
    assert [s.session_id for s in sessions.list(0, 10).sessions] == ["s"]
    assert sessions.count() == 1
    with pytest.raises(SessionNotFound):
        sessions.delete("never-existed")


def test_a_warm_recall_naming_its_actor_reads_session_and_generation_together_and_sees_writes(
    make_store, monkeypatch
):
    import redis.connection

    from agent_memory.memories.models import MemoryIn

    config, sessions = make_store(dimensions=4)
    sessions.append("s", _events("what do I drink?", actor="ann"))
    mine, other = _memories(config), _memories(config)  # two containers
    mine.add(MemoryIn(text="Ann drinks green tea", actor_id="ann", vector=[1, 0, 0, 0]))
    request = RecallRequest(session_id="s", actor_id="ann", query="tea coffee")
    assert [m.text for m in recall(sessions, mine, config, request).memories] == [
        "Ann drinks green tea"
    ]
    other.add(MemoryIn(text="Ann drank coffee once", actor_id="ann", vector=[0, 0, 1, 0]))
    recall(sessions, mine, config, request)  # a first catch-up: its script loaded in this process
    other.add(MemoryIn(text="Ann drinks coffee now", actor_id="ann", vector=[0, 1, 0, 0]))
    sent = []
    real = redis.connection.AbstractConnection.send_packed_command
    monkeypatch.setattr(
        redis.connection.AbstractConnection,
        "send_packed_command",
        lambda self, *a, **k: sent.append(1) or real(self, *a, **k),
    )
    found = recall(sessions, mine, config, request)
    texts = sorted(m.text for m in found.memories)
    assert texts == ["Ann drank coffee once", "Ann drinks coffee now", "Ann drinks green tea"]
    if ON_CLUSTER:  # slots apart: the session, then the generation (database.scripts.script_then)
        return
    # the session and the generation, then the catch-up (the other container's write, with
    # its record: the index holds the records it ranks, so none is read again)
    assert len(sent) == 2
    sent.clear()
    recall(sessions, mine, config, request)
    assert len(sent) == 1  # nothing new: the session and the generation, one round trip
