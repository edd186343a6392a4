"""Reads while the database refuses writes.

A redis-server of this module's own is filled up to its ``maxmemory`` under ``maxmemory-policy
noeviction``, so that every write answers OOM; then, in the second run of every test, one that
cannot persist (its RDB save failed, and ``stop-writes-on-bgsave-error`` is on), so that every
write answers MISCONF. Every read route still answers 200 with what it answered before the
database refused writes; every write answers 503 with Retry-After and changes nothing stored.

The database holds the control plane too, so every route's look-ups (API key, instance, store)
run against the full database as well; the authorizer, which must count each request against
its limits, refuses them then (503: limits fail closed). Each request runs in a cold
container (no runtime, no index cache, no database client and so no script loaded yet), the
worst case. The store holds index entries whose time is up (sessions and a memory written "two
hours ago"), which a listing prunes when it can.
"""

from __future__ import annotations

import gc
import itertools
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis

from agent_memory.clock import SystemClock
from agent_memory.control.plane import ControlPlane
from agent_memory.database.client import real_client, redis_client
from agent_memory.database.keys import ControlKeys
from agent_memory.edge.runtime import runtime_for
from agent_memory.memories.models import MemoryIn, MemoryPatch, SearchRequest
from agent_memory.memories.service import Memories
from agent_memory.providers.embeddings import NoEmbedder
from agent_memory.providers.secrets import FernetCipher
from agent_memory.search.cache import IndexCache
from agent_memory.sessions.models import EventIn, EventsRequest
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.models import StorePut
from agent_memory.stores.registry import Stores
from local.bootstrap import start_embedded, start_redis_server
from local.server import LambdaContext
from tests.support.clocks import MovableClock
from tests.support.databases import Tenant
from tests.support.handlers import API, build, invoke, sample
from tests.support.stores import sessions_of

STORE = "notes"
ACTOR = "user-7"
FILLER = "filler:"

DEPLOYS = "Deploys to eu-west-1 on Fridays."
SHORT = "Prefers short answers."
NO_ACTOR = "A note without an actor."

# Each read route, with the request options of tests.support.handlers.build;
# "memory" puts the id of the memory DEPLOYS in the path.
READS: dict[str, tuple[str, dict[str, Any]]] = {
    "get_store": ("get_store", {}),
    "list_instance_stores": ("list_instance_stores", {}),
    "list_stores": ("list_stores", {}),
    "list_sessions": ("list_sessions", {"query": "offset=0&limit=20"}),
    "get_session": ("get_session", {"session": "chat-1", "query": "recent=50"}),
    "get_session_deleted": ("get_session", {"session": "chat-2", "query": "recent=50"}),
    "recall_keyword": ("recall", {"body": {"session_id": "chat-1", "query": "eu-west-1"}}),
    "recall_hybrid": (
        "recall",
        {"body": {"session_id": "chat-1", "query": "eu-west-1", "query_vector": [1, 0, 0]}},
    ),
    "recall_new_session": ("recall", {"body": {"session_id": "chat-9", "actor_id": ACTOR}}),
    "list_memories": ("list_memories", {"query": "offset=0&limit=20"}),
    "list_memories_of_actor": ("list_memories", {"query": f"offset=0&limit=20&actor_id={ACTOR}"}),
    "list_memories_of_type": ("list_memories", {"query": "offset=0&limit=20&type=semantic"}),
    "get_memory": ("get_memory", {"memory": True}),
    "search_keyword": (
        "search_memories",
        {"body": {"query": "eu-west-1", "mode": "keyword", "actor_id": ACTOR}},
    ),
    "search_keyword_every_actor": (
        "search_memories",
        {"body": {"query": "deploys", "mode": "keyword"}},
    ),
    "search_semantic": (
        "search_memories",
        {"body": {"query": "x", "mode": "semantic", "actor_id": ACTOR, "query_vector": [1, 0, 0]}},
    ),
    "search_hybrid_every_actor": (
        "search_memories",
        {"body": {"query": "deploys", "mode": "hybrid", "query_vector": [1, 0, 0]}},
    ),
}


@dataclass
class Full:
    """The full database, its tenant, the ids seeded and the answers given before it filled."""

    tenant: Tenant
    client: redis.Redis
    ids: dict[str, str]  # text -> memory id
    before: dict[str, tuple[int, Any]]
    warm: Memories  # a container whose index is behind the database


def cold_container() -> None:
    """Forget the runtime (its index cache) and the database clients (and so the scripts they
    loaded), as a new Lambda container starts with none."""
    runtime_for.cache_clear()
    redis_client.cache_clear()


def call(full: Full, name: str, **options: Any) -> tuple[int, Any, dict[str, str]]:
    """``name``'s handler on a request built by ``build`` (``memory``: the DEPLOYS memory's id
    in the path), in a cold container."""
    memory = options.pop("memory", False)
    event = build(name, full.tenant, STORE, **options)
    if memory:
        path = event["rawPath"].replace("mem_0123456789abcdef0123", full.ids[DEPLOYS])
        event["rawPath"] = event["requestContext"]["http"]["path"] = path
    cold_container()
    return invoke(name, event)


def read(full: Full, route: str) -> tuple[int, Any]:
    name, options = READS[route]
    status, body, _ = call(full, name, **options)
    return status, body


def refuses_writes(client: redis.Redis) -> bool:
    """Whether the server answers a write with OOM or MISCONF right now. (A failing save can
    turn MISCONF on between the probe's write and its removal: then it refuses writes, too.)"""
    try:
        client.set(FILLER + "probe", "x")
        client.delete(FILLER + "probe")
    except redis.exceptions.OutOfMemoryError:
        return True
    except redis.ResponseError as exc:
        if str(exc).startswith("MISCONF "):
            return True
        raise
    return False


def fill(client: redis.Redis) -> None:
    """Write 8 KB strings until the server answers OOM. Then lower ``maxmemory`` a little below
    what is used: the server frees a few kilobytes on its own now and then (it shrinks idle
    clients' buffers), which would let writes through again half-way through the tests. The
    clients the seeding made and dropped are collected first: redis-py's clients are reference
    cycles, so their connections stay open until the garbage collector runs, and closing a
    dozen of them mid-test frees more than that margin."""
    gc.collect()
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", int(client.info("memory")["used_memory"]) + 256 * 1024)
    value = b"x" * 8192
    for n in itertools.count():
        try:
            client.set(f"{FILLER}{n}", value)
        except redis.exceptions.OutOfMemoryError:
            assert n > 0
            break
    client.config_set("maxmemory", int(client.info("memory")["used_memory"]) - 128 * 1024)
    assert refuses_writes(client)


def break_persistence(client: redis.Redis, data_dir: Path) -> None:
    """Make the server's RDB saves fail (its directory, ``data_dir``, is removed; a save
    retries every 5 s and fails again), so that it answers MISCONF to every write while
    ``stop-writes-on-bgsave-error`` is on (its default) and a save point is set. (``dir`` is a
    protected setting that CONFIG SET refuses.) ``mend_persistence`` before stopping it."""
    client.config_set("save", "3600 1")
    client.config_set("stop-writes-on-bgsave-error", "yes")
    shutil.rmtree(data_dir)
    client.bgsave()
    deadline = time.monotonic() + 10
    while not refuses_writes(client):
        assert time.monotonic() < deadline
        time.sleep(0.05)


def mend_persistence(client: redis.Redis) -> None:
    """No save point: the server stops on SIGTERM without the save that would fail (Redis
    refuses to exit when its shutdown save fails)."""
    client.config_set("save", "")


def snapshot(client: redis.Redis) -> dict[str, tuple[bytes, int]]:
    """Every key but the filler, with its serialized value and expiry time: what is stored."""
    binary = redis.Redis(connection_pool=redis.ConnectionPool.from_url(_url(client)))
    keys = sorted(k for k in binary.scan_iter(count=1000) if not k.startswith(FILLER.encode()))
    return {k.decode(): (binary.dump(k), binary.execute_command("PEXPIRETIME", k)) for k in keys}


def _url(client: redis.Redis) -> str:
    kwargs = client.connection_pool.connection_kwargs
    return f"redis://{kwargs['host']}:{kwargs['port']}/0"


def _events(*contents: str, actor: str | None = None) -> EventsRequest:
    return EventsRequest(actor_id=actor, events=[EventIn(role="user", content=c) for c in contents])


def _core(url: str, instance_id: str, secret_key: str, clock: Any) -> tuple[Stores, Memories]:
    client = redis.Redis.from_url(url, decode_responses=True)
    stores = Stores(client, instance_id, FernetCipher(secret_key.encode("ascii")), clock)
    config = stores.get(STORE)
    memories = Memories(
        StoreDatabase(client, redis.Redis.from_url(url), config, clock),
        NoEmbedder(3),
        IndexCache(),
        "seed",
    )
    return stores, memories


def seed_live(url: str, instance_id: str, secret_key: str, warm: list[Memories]) -> dict[str, str]:
    """The store, a live session, a deleted one, and live memories; returns the memories' ids.
    ``warm`` receives a container's ``Memories`` whose index was read before the last memories
    of ACTOR were kept."""
    client = redis.Redis.from_url(url, decode_responses=True)
    cipher = FernetCipher(secret_key.encode("ascii"))
    Stores(client, instance_id, cipher, SystemClock()).put(
        STORE, StorePut(dimensions=3, memory_ttl_seconds=3600)
    )
    stores, memories = _core(url, instance_id, secret_key, SystemClock())
    warm.append(_core(url, instance_id, secret_key, SystemClock())[1])
    sessions = sessions_of(stores, stores.get(STORE))
    sessions.append("chat-1", _events("We deploy to eu-west-1 on Fridays.", actor=ACTOR))
    sessions.append("chat-2", _events("Delete me.", actor=ACTOR))
    sessions.delete("chat-2")
    vectors = {DEPLOYS: [1.0, 0.1, 0.0], SHORT: [0.0, 1.0, 0.0], NO_ACTOR: [0.5, 0.5, 0.0]}
    ids = {}
    for text, vector in vectors.items():
        actor = None if text == NO_ACTOR else ACTOR
        time.sleep(0.003)  # each in its own millisecond (created_at's precision): newest first
        ids[text] = memories.add(MemoryIn(text=text, actor_id=actor, vector=vector)).memory.id
        if text == DEPLOYS:  # a warm container's index, one memory behind from now on
            assert [m.text for m in warm[0].search(_search("answers", "keyword"))] == []
    return ids


def seed_expired(url: str, instance_id: str, secret_key: str) -> str:
    """Sessions and a memory whose time is up, written "two hours ago" (a past clock): their
    index entries stay until a listing prunes them. The memory belongs to another actor, so it
    changes no score of the reads (BM25 counts the memories of one actor, expired or not)."""
    past = MovableClock()
    past.moment -= timedelta(hours=2)
    stores, memories = _core(url, instance_id, secret_key, past)
    sessions = sessions_of(stores, stores.get(STORE))
    for n in range(3):
        sessions.append(f"old-{n}", _events("long gone", actor=ACTOR))
    old = MemoryIn(text="Deploys to us-east-1.", actor_id="user-9", vector=[1.0, 0.0, 0.0])
    return memories.add(old).memory.id


@pytest.fixture(scope="module", params=["oom", "misconf"])
def full(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, secret_key: str
) -> Iterator[Full]:
    data_dir = Path(tmp_path_factory.mktemp("full"))
    database = start_redis_server(data_dir, persist=False)
    url = database.url
    env = {
        "KIVIDB_CONTROL_URL": url,
        "KIVIDB_SECRET_KEY": secret_key,
        "POWERTOOLS_SERVICE_NAME": "agent-memory",
        "POWERTOOLS_METRICS_NAMESPACE": "KiviDB/AgentMemory",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "KIVIDB_INSTANCE_CACHE_SECONDS": "0",
    }
    client = redis.Redis.from_url(database.url, decode_responses=True)
    try:
        with pytest.MonkeyPatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            control = ControlPlane(client, SystemClock())
            control.create_organization("full-org")
            control.register_instance("full-org", "full-db", url, allow_unreachable=True)
            key_id, api_key = control.issue_api_key("full-org")
            tenant = Tenant("full-org", "full-db", api_key, key_id, control, url)
            warm: list[Memories] = []
            ids = seed_live(url, tenant.instance_id, secret_key, warm)
            state = Full(tenant, client, ids, {}, warm[0])
            state.before = {route: read(state, route) for route in READS}
            seed_expired(url, tenant.instance_id, secret_key)
            if request.param == "oom":
                fill(client)
            else:
                break_persistence(client, data_dir)
            yield state
    finally:
        cold_container()
        mend_persistence(client)
        database.stop()


def test_the_answers_before_the_database_filled_up_are_the_expected_ones(full):
    """What the reads are compared with: every answer is the content seeded."""
    before = {route: body for route, (status, body) in full.before.items()}
    assert {route: status for route, (status, _) in full.before.items()} == {
        route: 404 if route == "get_session_deleted" else 200 for route in READS
    }
    assert before["get_store"]["counts"] == {
        "sessions": 1,
        "memories": 3,
        "waiting_for_extraction": 0,
    }
    assert [s["name"] for s in before["list_instance_stores"]["stores"]] == [STORE]
    assert [s["name"] for s in before["list_stores"]["stores"]] == [STORE]
    assert [s["session_id"] for s in before["list_sessions"]["sessions"]] == ["chat-1"]
    assert [m["content"] for m in before["get_session"]["messages"]] == [
        "We deploy to eu-west-1 on Fridays."
    ]
    assert before["get_session_deleted"]["error"] == "session_not_found"
    assert [m["text"] for m in before["recall_keyword"]["memories"]] == [DEPLOYS]
    assert [m["text"] for m in before["recall_hybrid"]["memories"]] == [DEPLOYS, SHORT]
    assert len(before["recall_hybrid"]["messages"]) == 1
    assert before["recall_new_session"]["messages"] == []
    assert [m["text"] for m in before["list_memories"]["memories"]] == [NO_ACTOR, SHORT, DEPLOYS]
    assert [m["text"] for m in before["list_memories_of_actor"]["memories"]] == [SHORT, DEPLOYS]
    assert len(before["list_memories_of_type"]["memories"]) == 3
    assert before["get_memory"]["text"] == DEPLOYS
    assert [m["text"] for m in before["search_keyword"]["memories"]] == [DEPLOYS]
    assert [m["text"] for m in before["search_keyword_every_actor"]["memories"]] == [DEPLOYS]
    assert before["search_semantic"]["memories"][0]["text"] == DEPLOYS
    assert before["search_hybrid_every_actor"]["memories"][0]["text"] == DEPLOYS


@pytest.mark.parametrize("route", sorted(READS))
def test_a_read_answers_as_before_while_the_database_refuses_writes(full, route):
    assert read(full, route) == full.before[route]
    assert refuses_writes(full.client)  # the answer was given by a full database


def test_the_authorizer_refuses_a_request_it_cannot_count_while_the_database_refuses_writes(
    full,
):
    """Limits fail closed (issue 32): a control database that refuses writes cannot take the
    request's token, so the request is refused with 503 (and Retry-After), not let through
    uncounted. The key is still known (its record is read): the refusal says why."""
    event = sample("authorizer")
    event["headers"]["authorization"] = f"Bearer {full.tenant.api_key}"
    cold_container()
    answer = API.authorizer.load()(event, LambdaContext("authorizer"))
    assert answer["isAuthorized"] is True
    assert answer["context"]["error"] == "database_unavailable"
    assert "org_id" not in answer["context"]
    assert refuses_writes(full.client)


def test_an_idle_connection_is_checked_and_reads_while_the_database_refuses_writes(full):
    """A warm container's pooled connection is checked with PING when it has been idle for
    30 s; a database that cannot persist answers that PING with MISCONF, and the connection is
    still good for reads."""
    warm = real_client(redis_client(full.tenant.url))
    assert warm.exists(ControlKeys.organizations) == 1
    pool = warm.connection_pool
    idle = list(pool._available_connections)  # type: ignore[attr-defined]
    assert idle and all(c.health_check_interval == 30 for c in idle)
    for connection in idle:
        connection.next_health_check = 0  # as if 30 s went by
    assert warm.exists(ControlKeys.organizations) == 1
    assert refuses_writes(full.client)


def test_a_warm_index_catches_up_while_the_database_refuses_writes(full):
    found = full.warm.search(_search("answers", "keyword"))
    assert [m.text for m in found] == [SHORT]
    assert refuses_writes(full.client)


def test_listings_only_skip_the_expired_entries_they_cannot_prune(full):
    """Pruning is a write: while the database is full, the expired ids stay in the indexes
    (and are skipped by every answer, as the reads above show)."""
    indexes = full.client.keys(f"kividb:mem:{STORE}:*:sessions:expiry")
    assert len(indexes) == 1
    read(full, "list_sessions")
    read(full, "list_memories")
    assert full.client.zcard(indexes[0]) == 4  # chat-1 and the three expired ones


WRITES: dict[str, tuple[str, dict[str, Any]]] = {
    "append_to_a_session": ("add_events", {"session": "chat-1"}),
    "append_to_a_new_session": ("add_events", {"session": "chat-3"}),
    "add_a_memory": (
        "add_memory",
        {"body": {"text": "Likes tea.", "actor_id": ACTOR, "vector": [0, 0, 1]}},
    ),
    "change_a_memory": (
        "update_memory",
        {"memory": True, "body": {"text": "Deploys on Mondays.", "vector": [1, 0, 0]}},
    ),
    "delete_a_memory": ("delete_memory", {"memory": True}),
    "forget_an_actor": ("forget_actor", {}),
    "delete_a_session": ("delete_session", {"session": "chat-1"}),
    "change_the_store": ("put_store", {"body": {"summarize_after": 30}}),
    "create_a_store": ("put_store", {"body": {}}),
    "delete_the_store": ("delete_store", {}),
}


@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_write_answers_503_and_changes_nothing_while_the_database_is_full(full, write):
    name, options = WRITES[write]
    options = dict(options)
    if write == "create_a_store":
        event = build(name, full.tenant, "another-store", body={})
        cold_container()
        status, body, headers = invoke(name, event)
    else:
        stored = snapshot(full.client)
        status, body, headers = call(full, name, **options)
        assert snapshot(full.client) == stored
    assert (status, body, headers.get("Retry-After")) == (
        503,
        {
            "error": "database_unavailable",
            "message": "The database is not accepting writes right now; retry in a moment.",
        },
        "1",
    )
    assert read(full, "get_store") == full.before["get_store"]


def test_the_store_reads_the_same_after_every_refused_write(full):
    for route in ("get_session", "list_memories", "get_memory"):
        assert read(full, route) == full.before[route]
    assert read(full, "list_instance_stores") == full.before["list_instance_stores"]


# --- the same scripts on the embedded server, which knows no script flags -------------------


def test_the_embedded_server_runs_the_flagged_scripts_without_their_flags(secret_key):
    """fakeredis (the local stack's embedded server) takes a ``#!lua`` line for Lua; the
    scripts run there without it, with the same results."""
    database = start_embedded()
    try:
        url = database.url
        client = redis.Redis.from_url(url, decode_responses=True)
        cipher = FernetCipher(secret_key.encode("ascii"))
        Stores(client, "db", cipher, SystemClock()).put(STORE, StorePut(dimensions=3))
        stores, memories = _core(url, "db", secret_key, SystemClock())
        sessions = sessions_of(stores, stores.get(STORE))
        assert sessions.append("s1", _events("one", "two", actor=ACTOR)).message_count == 2
        assert [m.content for m in sessions.get("s1", recent=1).messages] == ["two"]
        assert [s.session_id for s in sessions.list(0, 10).sessions] == ["s1"]
        kept = memories.add(MemoryIn(text=DEPLOYS, actor_id=ACTOR, vector=[1, 0, 0])).memory
        again = memories.add(MemoryIn(text=DEPLOYS, actor_id=ACTOR, vector=[1, 0, 0]))
        assert again.duplicate and again.memory.id == kept.id
        memories.patch(kept.id, MemoryPatch(text="Deploys on Mondays.", vector=[1, 0, 0]))
        fresh = Memories(
            StoreDatabase(client, redis.Redis.from_url(url), stores.get(STORE), SystemClock()),
            NoEmbedder(3),
            IndexCache(),
            "fresh",
        )
        found = fresh.search(
            _search("mondays", "keyword"),
        )
        assert [m.text for m in found] == ["Deploys on Mondays."]
        assert [m.id for m in fresh.page(0, 10, None, None).memories] == [kept.id]
        memories.delete(kept.id)
        assert fresh.count() == 0 and fresh.search(_search("mondays", "keyword")) == []
        sessions.delete("s1")
        assert sessions.list(0, 10).sessions == [] and sessions.count() == 0
    finally:
        database.stop()


def _search(query: str, mode: str) -> SearchRequest:
    return SearchRequest(query=query, mode=mode, actor_id=ACTOR)
