"""Search and recall start from the store settings this container read last and confirm them in
their first round trip (``stores.freshness``): whatever another container changed meanwhile
(a setting, a delete, a delete and a create under the same name), the answer is the one a fresh
read of the settings gives, and nothing is written under settings that were not the store's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from agent_memory.clock import SystemClock
from agent_memory.database.client import redis_client
from agent_memory.database.keys import StoreKeys, actor_bucket
from agent_memory.errors import StoreNotFound
from agent_memory.memories import indexes
from agent_memory.memories.indexes import ActorIndexes
from agent_memory.providers.secrets import FernetCipher
from agent_memory.search.cache import IndexCache
from agent_memory.stores import freshness
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.freshness import SettingsCheck, StaleSettings
from agent_memory.stores.models import StorePut
from agent_memory.stores.registry import Stores
from tests.integration.test_request_path import Client, _store_keys
from tests.support.common import unique

TYPE = {"name": "order_issue", "description": "A problem with an order"}


@contextmanager
def elsewhere() -> Iterator[None]:
    """What runs inside happens in another container: this one's remembered registry entries
    are as they were before."""
    with freshness._entries_lock:
        saved = dict(freshness._entries)
    try:
        yield
    finally:
        with freshness._entries_lock:
            freshness._entries.clear()
            freshness._entries.update(saved)


def _other(tenant: Any, secret_key: str) -> Stores:
    return Stores(
        redis_client(tenant.url),
        tenant.instance_id,
        FernetCipher(secret_key.encode()),
        SystemClock(),
        org_id=tenant.org_id,
    )


@pytest.fixture
def made(tenant, secret_key) -> Iterator[list[str]]:
    """The names of the stores a test makes, deleted when it ends (a cluster's tenants share
    one database, whose listings other tests read)."""
    names: list[str] = []
    yield names
    other = _other(tenant, secret_key)
    for name in names:
        with elsewhere(), suppress(StoreNotFound):
            other.delete(name)


def _change(other: Stores, store: str, change: str, incarnations: set[str]) -> None:
    """One change of another container: ``retype`` adds a custom type, ``resize`` changes a
    setting the reads use (``keep_recent``), ``delete`` deletes the store, ``recreate`` deletes
    it and creates it again with 3 dimensions."""
    with elsewhere():
        if change == "retype":
            other.put(store, StorePut.model_validate({"custom_types": [TYPE]}))
        elif change == "resize":
            other.put(store, StorePut.model_validate({"keep_recent": 3}))
        else:
            with suppress(StoreNotFound):
                incarnations.add(other.get(store).incarnation)
                other.delete(store)
            if change == "recreate":
                other.put(store, StorePut.model_validate({"dimensions": 3}))


def _read(call: Client, store: str, route: str, typed: bool) -> tuple[int, Any]:
    types = {"types": ["order_issue"]} if typed else {}
    if route == "search":
        body = {"query": "tea", "mode": "keyword", "actor_id": "ann", **types}
        status, answer = call("POST", f"/{store}/memories/search", body)
    else:
        body = {"session_id": "s1", "actor_id": "ann", "query": "tea", **types}
        status, answer = call("POST", f"/{store}/recall", body)
    return status, json.loads(answer)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    changes=st.lists(st.sampled_from(["retype", "resize", "delete", "recreate"]), max_size=3),
    route=st.sampled_from(["search", "recall"]),
    typed=st.booleans(),
)
def test_a_read_from_the_settings_read_last_answers_as_a_fresh_read(
    tenant, warm_env, secret_key, made, changes, route, typed
):
    call, store, other = Client(tenant), unique("store"), _other(tenant, secret_key)
    made.append(store)
    assert call("PUT", f"/{store}", {"dimensions": 4})[0] == 201
    memory = {"text": "Ann drinks green tea", "actor_id": "ann", "vector": [1, 0, 0, 0]}
    assert call("POST", f"/{store}/memories", memory)[0] == 201
    turn = {"actor_id": "ann", "events": [{"role": "user", "content": "tea again?"}]}
    assert call("POST", f"/{store}/sessions/s1/events", turn)[0] == 200
    assert _read(call, store, route, typed=False)[0] == 200  # read: settings and index kept
    gone: set[str] = set()
    for change in changes:
        _change(other, store, change, gone)
    remembered = _read(call, store, route, typed)
    freshness.forget_all()
    assert remembered == _read(call, store, route, typed)  # as from settings read now
    if not changes:
        assert remembered[0] == 200 or typed
    for incarnation in gone:
        assert _store_keys(tenant, store, incarnation) == []


def test_a_deleted_store_answers_404_to_a_read_that_remembered_it(
    tenant, warm_env, secret_key, made
):
    call, store = Client(tenant), unique("store")
    made.append(store)
    assert call("PUT", f"/{store}", {"dimensions": 4})[0] == 201
    assert _read(call, store, "search", typed=False)[0] == 200
    with elsewhere():
        _other(tenant, secret_key).delete(store)
    for route in ("search", "recall"):
        status, answer = _read(call, store, route, typed=False)
        assert (status, answer["error"]) == (404, "store_not_found"), answer


def test_an_index_is_never_kept_under_settings_that_changed(tenant, warm_env, monkeypatch, made):
    """The one write of a read route (an actor's kept index) confirms the settings first."""
    monkeypatch.setattr(indexes, "KEEP_FROM", 1)
    call, store = Client(tenant), unique("store")
    made.append(store)
    assert call("PUT", f"/{store}", {"dimensions": 4})[0] == 201
    memory = {"text": "Ann drinks green tea", "actor_id": "ann", "vector": [1, 0, 0, 0]}
    assert call("POST", f"/{store}/memories", memory)[0] == 201
    text, binary = redis_client(tenant.url), redis_client(tenant.url, binary=True)
    stores = Stores(text, tenant.instance_id, FernetCipher(b"0" * 43 + b"="), SystemClock())
    config = stores.get(store)
    bucket = actor_bucket("ann")
    built = ActorIndexes(
        StoreDatabase(text, binary, config, SystemClock()), IndexCache(1 << 20), "a"
    ).index(bucket)
    built.kept = -2  # to be replaced: keep writes it unless the settings stop it
    kept = [key for key in _store_keys(tenant, store, config.incarnation) if ":index:" in key]
    assert kept  # the first read kept it (KEEP_FROM 1): removed, to see whether it comes back
    text.delete(*kept)
    before = sorted(_store_keys(tenant, store, config.incarnation))
    stale = SettingsCheck(store, '{"incarnation": "an earlier one"}')
    db = StoreDatabase(text, binary, config, SystemClock(), stale)
    with pytest.raises(StaleSettings):
        ActorIndexes(db, IndexCache(1 << 20), "b").keep(bucket, built)
    assert sorted(_store_keys(tenant, store, config.incarnation)) == before
    current = SettingsCheck(store, text.hget(StoreKeys.registry, store))
    db = StoreDatabase(text, binary, config, SystemClock(), current)
    ActorIndexes(db, IndexCache(1 << 20), "c").keep(bucket, built)  # confirmed: kept
    assert sorted(_store_keys(tenant, store, config.incarnation)) == sorted(before + kept)
