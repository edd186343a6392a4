"""The warm request path through the local gateway (routing, the authorizer, the function) on a
real Redis: how many round trips a warm recall makes, the store settings a container keeps
(never those of a store deleted and created again under the same name), and the answer's JSON
text as pydantic writes it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import redis
import redis.connection
import redis.utils

from agent_memory.clock import SystemClock
from agent_memory.database.client import real_client, redis_client
from agent_memory.database.keys import StoreKeys
from agent_memory.memories.models import RecallView
from agent_memory.providers.secrets import FernetCipher
from agent_memory.stores.models import StorePut
from agent_memory.stores.registry import Stores
from local.server import Gateway
from tests.support.common import unique
from tests.support.handlers import API

FIELDS = [
    {"name": "city", "description": "Where the actor lives", "type": "text"},
    {"name": "likes", "description": "What the actor likes", "type": "list"},
]


class Client:
    """Requests through the local gateway with the tenant's API key: ``(status, body)``."""

    def __init__(self, tenant: Any) -> None:
        self.gateway = Gateway(API)
        self.base = f"/instances/{tenant.instance_id}/agent-memory"
        self.headers = [
            ("authorization", f"Bearer {tenant.api_key}"),
            ("content-type", "application/json"),
        ]

    def __call__(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        raw = b"" if body is None else json.dumps(body).encode()
        status, _, answer = asyncio.run(
            self.gateway.invoke(method, self.base + path, "", self.headers, raw)
        )
        return status, answer


def _round_trips(monkeypatch) -> list[int]:
    sent: list[int] = []
    real = redis.connection.AbstractConnection.send_packed_command
    monkeypatch.setattr(
        redis.connection.AbstractConnection,
        "send_packed_command",
        lambda self, *a, **k: sent.append(1) or real(self, *a, **k),
    )
    return sent


def test_a_warm_recall_with_a_profile_takes_two_round_trips(tenant, warm_env, monkeypatch):
    call, store = Client(tenant), unique("store")
    assert call("PUT", f"/{store}", {"dimensions": 4, "profile_fields": FIELDS})[0] == 201
    patch = {"fields": {"city": "Lisbon", "likes": ["tea", "trains"]}}
    assert call("PATCH", f"/{store}/actors/ann/profile", patch)[0] == 200
    memory = {"text": "Ann drinks green tea", "actor_id": "ann", "vector": [1, 0, 0, 0]}
    assert call("POST", f"/{store}/memories", memory)[0] == 201
    turn = {"actor_id": "ann", "events": [{"role": "user", "content": "tea again?"}]}
    assert call("POST", f"/{store}/sessions/s1/events", turn)[0] == 200
    recall = {"session_id": "s1", "actor_id": "ann", "query": "tea", "query_vector": [1, 0, 0, 0]}
    for _ in range(3):  # warm: the key seen, the instance, the index, the scripts
        assert call("POST", f"/{store}/recall", recall)[0] == 200
    sent = _round_trips(monkeypatch)
    status, answer = call("POST", f"/{store}/recall", recall)
    assert status == 200
    view = json.loads(answer)
    assert view["profile"] == {"city": "Lisbon", "likes": ["tea", "trains"]}
    assert [m["text"] for m in view["memories"]] == ["Ann drinks green tea"]
    assert view["messages"][0]["content"] == "tea again?"
    # The authorizer's (its key and its buckets), then the recall's reads (the session, the
    # memories, the profile) with the store's registry entry, which confirms the settings this
    # container read last (stores.freshness), in one.
    assert len(sent) == 2
    sent.clear()
    search = {"query": "tea", "mode": "semantic", "actor_id": "ann", "query_vector": [1, 0, 0, 0]}
    status, answer = call("POST", f"/{store}/memories/search", search)
    assert status == 200 and json.loads(answer)["memories"][0]["text"] == "Ann drinks green tea"
    assert len(sent) == 2  # the authorizer's, the actor's generation with the registry entry


def _store_keys(tenant, store: str, incarnation: str) -> list[str]:
    client = redis.Redis.from_url(tenant.url, decode_responses=True)
    return list(client.scan_iter(match=StoreKeys(store, incarnation).all_pattern, count=1000))


def test_a_store_deleted_and_created_again_is_never_written_with_its_old_settings(
    tenant, warm_env, secret_key
):
    """Container A reads a store's settings and keeps them; another container deletes the
    store and creates it again under the same name, with other settings; A's next requests
    write under the new incarnation and validate with the new settings."""
    call, store = Client(tenant), unique("store")
    assert call("PUT", f"/{store}", {"dimensions": 4})[0] == 201
    first = {"text": "Ann likes tea", "actor_id": "ann", "vector": [1, 0, 0, 0]}
    assert call("POST", f"/{store}/memories", first)[0] == 201
    events = {"actor_id": "ann", "events": [{"role": "user", "content": "hello"}]}
    assert call("POST", f"/{store}/sessions/s1/events", events)[0] == 200
    other = Stores(
        redis_client(tenant.url),
        tenant.instance_id,
        FernetCipher(secret_key.encode()),
        SystemClock(),
        org_id=tenant.org_id,
    )
    old = other.get(store).incarnation
    other.delete(store)  # another container, between two of A's requests
    other.put(store, StorePut.model_validate({"dimensions": 3}))
    new = other.get(store).incarnation
    assert new != old
    assert call("POST", f"/{store}/sessions/s1/events", events)[0] == 200
    status, answer = call("POST", f"/{store}/memories", first)  # 4 numbers: the old settings
    assert status == 422 and b"3" in answer, answer
    second = {"text": "Ann likes trains", "actor_id": "ann", "vector": [0, 1, 0]}
    assert call("POST", f"/{store}/memories", second)[0] == 201
    status, answer = call("GET", f"/{store}/sessions/s1")
    assert status == 200 and json.loads(answer)["message_count"] == 1  # the new store's one
    search = {"query": "Ann", "mode": "keyword", "actor_id": "ann"}
    status, answer = call("POST", f"/{store}/memories/search", search)
    assert [m["text"] for m in json.loads(answer)["memories"]] == ["Ann likes trains"]
    assert _store_keys(tenant, store, old) == []
    assert _store_keys(tenant, store, new) != []


def test_unchanged_settings_are_parsed_once_and_any_change_is_read(tenant, secret_key):
    stores = Stores(
        redis_client(tenant.url),
        tenant.instance_id,
        FernetCipher(secret_key.encode()),
        SystemClock(),
        org_id=tenant.org_id,
    )
    store = unique("store")
    stores.put(store, StorePut.model_validate({"dimensions": 4}))
    kept = stores.get(store)
    assert stores.get(store) is kept  # the same entry text: the settings parsed before
    stores.put(store, StorePut.model_validate({"keep_recent": 7}))
    changed = stores.get(store)
    assert changed is not kept and changed.keep_recent == 7
    assert changed.incarnation == kept.incarnation


def test_an_answer_is_compact_utf8_json_of_its_model(tenant, warm_env):
    call, store = Client(tenant), unique("store")
    assert call("PUT", f"/{store}", {"dimensions": 4})[0] == 201
    text = 'Zoë said "ça va" \u2014 naïve \U0001f375 tea'
    turn = {"actor_id": "zoe", "events": [{"role": "user", "content": text}]}
    assert call("POST", f"/{store}/sessions/s1/events", turn)[0] == 200
    status, answer = call("POST", f"/{store}/recall", {"session_id": "s1", "query": "tea"})
    assert status == 200
    compact = json.dumps(json.loads(answer), separators=(",", ":"), ensure_ascii=False)
    assert answer == compact.encode()  # no spaces, UTF-8 rather than \u escapes
    view = RecallView.model_validate_json(answer)
    assert json.loads(answer) == json.loads(view.model_dump_json(by_alias=True))
    assert view.messages[0].content == text


def test_a_new_connection_tells_redis_py_s_version_without_reading_package_metadata(
    redis_url, monkeypatch
):
    """redis-py read its version from the installed package's metadata for every connection
    (1-7 ms each; three in a new container's first recall); it is read once now."""

    def read_metadata() -> str:
        raise AssertionError("a connection read the package metadata")

    monkeypatch.setattr(redis.utils, "get_lib_version", read_metadata)
    connection = real_client(redis_client(redis_url)).connection_pool.make_connection()
    connection.connect()
    try:
        connection.send_command("CLIENT", "INFO")
        info = str(connection.read_response())
    finally:
        connection.disconnect()
    told = connection.driver_info
    assert (told.formatted_name, told.lib_version) == ("redis-py", redis.__version__)
    if "lib-name=" in info:  # CLIENT SETINFO: Redis 7.2 and later
        assert f"lib-name=redis-py lib-ver={redis.__version__}" in info
