"""Stores on a real Redis server: create, change, encrypted keys, delete everything."""

import pytest
from cryptography.fernet import Fernet

from agent_memory.clock import SystemClock
from agent_memory.database.keys import StoreKeys
from agent_memory.errors import StoreNotFound, ValidationFailed
from agent_memory.providers.secrets import FernetCipher
from agent_memory.sessions.models import EventIn, EventsRequest
from agent_memory.stores.models import StorePut
from agent_memory.stores.registry import Stores
from tests.support.common import unique
from tests.support.stores import sessions_of


@pytest.fixture
def stores(client):
    return Stores(client, "db", FernetCipher(Fernet.generate_key()), SystemClock())


def test_create_takes_defaults_then_change_keeps_what_is_omitted(stores):
    name = unique("s")
    config, created = stores.put(name, StorePut(summarize_after=20))
    assert created and config.summarize_after == 20 and config.keep_recent == 12
    config, created = stores.put(name, StorePut(keep_recent=5))
    assert not created and (config.summarize_after, config.keep_recent) == (20, 5)
    config, _ = stores.put(name, StorePut.model_validate({"summarize_after": None}))
    assert config.summarize_after == 40 and config.keep_recent == 5
    stores.delete(name)


def test_invalid_merge_changes_nothing(stores):
    name = unique("s")
    stores.put(name, StorePut(summarize_after=20, keep_recent=5))
    with pytest.raises(ValidationFailed) as error:
        stores.put(name, StorePut(keep_recent=30))
    assert error.value.details and "keep_recent" in error.value.details[0]["problem"]
    assert stores.get(name).keep_recent == 5
    stores.delete(name)


def test_api_keys_are_encrypted_at_rest_and_never_in_the_view(stores, client):
    name = unique("s")
    config, _ = stores.put(
        name,
        StorePut(llm_provider="openai", llm_model="gpt-4o-mini", llm_api_key="sk-SECRET-123"),
    )
    raw = client.hget(StoreKeys.registry, name)
    assert "sk-SECRET-123" not in raw
    view = stores.view(config)
    assert view.has_llm_api_key and not view.has_embed_api_key
    assert "sk-SECRET-123" not in view.model_dump_json()
    config, _ = stores.put(name, StorePut.model_validate({"llm_api_key": None}))
    assert not stores.view(config).has_llm_api_key
    stores.delete(name)


def test_a_key_is_never_kept_for_another_provider_or_endpoint(stores):
    name = unique("s")
    openai = {
        "llm_provider": "openai",
        "llm_model": "gpt-4o-mini",
        "llm_api_key": "sk-1",
        "embed_provider": "openai",
        "embed_model": "text-embedding-3-small",
        "embed_api_key": "sk-2",
    }
    config, _ = stores.put(name, StorePut.model_validate(openai))
    config, _ = stores.put(name, StorePut(dedupe_threshold=0.9, llm_model="gpt-4o"))
    assert config.llm_api_key_ciphertext and config.embed_api_key_ciphertext  # same provider
    custom = {"llm_provider": "custom", "llm_base_url": "https://llm.example.com/v1"}
    config, _ = stores.put(name, StorePut.model_validate(custom))
    view = stores.view(config)
    assert not view.has_llm_api_key and view.has_embed_api_key  # the OpenAI key is gone
    config, _ = stores.put(name, StorePut(llm_api_key="custom-key"))
    assert stores.view(config).has_llm_api_key
    moved = {"llm_base_url": "https://other.example.com/v1"}
    config, _ = stores.put(name, StorePut.model_validate(moved))
    assert not stores.view(config).has_llm_api_key  # not sent to the new host either
    both = {"llm_base_url": "https://third.example.com/v1", "llm_api_key": "third-key"}
    config, _ = stores.put(name, StorePut.model_validate(both))
    assert stores.view(config).has_llm_api_key  # a new key with the move is kept
    stores.delete(name)


def test_delete_removes_every_key_the_store_owns_and_nothing_else(stores, client):
    name, neighbour = unique("s"), unique("s")
    patterns = {}
    for store in (name, neighbour):
        config, _ = stores.put(store, StorePut())
        patterns[store] = StoreKeys(store, config.incarnation).all_pattern
        sessions = sessions_of(stores, config)
        for session in ("a", "b:c", "d@e"):
            sessions.append(session, EventsRequest(events=[EventIn(role="user", content="hi")]))
    assert list(client.scan_iter(match=patterns[name]))
    stores.delete(name)
    assert list(client.scan_iter(match=f"kividb:mem:{name}:*")) == []
    with pytest.raises(StoreNotFound):
        stores.get(name)
    with pytest.raises(StoreNotFound):
        stores.delete(name)
    assert len(list(client.scan_iter(match=patterns[neighbour]))) == 8
    stores.delete(neighbour)


def test_listing_is_sorted_by_name(stores):
    names = sorted(unique("s") for _ in range(3))
    for name in reversed(names):
        stores.put(name, StorePut())
    listed = [c.name for c in stores.all() if c.name in names]
    assert listed == names
    for name in names:
        stores.delete(name)


def test_a_store_created_again_during_a_slow_delete_keeps_its_writes(stores, client):
    import threading

    name = unique("s")
    config, _ = stores.put(name, StorePut())
    old = config.keys()
    pipe = client.pipeline(transaction=False)
    for i in range(30_000):  # enough keys for the delete to take a while
        pipe.set(f"{old.all_pattern.removesuffix('*')}filler:{i}", "x")
    pipe.execute()
    deleting = threading.Thread(target=stores.delete, args=(name,))
    deleting.start()
    while True:  # create the store again as soon as the old one answers 404
        try:
            stores.get(name)
        except StoreNotFound:
            break
    config, created = stores.put(name, StorePut(summarize_after=33))
    assert created
    sessions_of(stores, config).append(
        "keep", EventsRequest(events=[EventIn(role="user", content="acknowledged")])
    )
    deleting.join()
    assert stores.get(name).summarize_after == 33
    kept = sessions_of(stores, stores.get(name)).get("keep", recent=5)
    assert [m.content for m in kept.messages] == ["acknowledged"]
    assert list(client.scan_iter(match=old.all_pattern, count=1000)) == []
    stores.delete(name)
