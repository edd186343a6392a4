"""Actors' profiles as a store keeps them (``memories.profiles``), on a real server (and on a
cluster with KIVIDB_TEST_CLUSTER=1): changes of several fields in one step, each field's
history newest first and capped, concurrent changes losing no version, forgetting, the count of
actors holding a field, and the keys in the actor's slot."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from cryptography.fernet import Fernet
from redis.cluster import key_slot

from agent_memory.database.keys import actor_bucket
from agent_memory.memories.profile_models import MAX_PROFILE_VERSIONS, ProfileSource
from agent_memory.memories.profiles import Profiles
from agent_memory.providers.secrets import FernetCipher
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.models import StorePut
from agent_memory.stores.registry import Stores
from tests.support.clocks import MovableClock
from tests.support.common import unique

CALLER = ProfileSource(by="caller")
FIELDS = [
    {"name": "city", "description": "Where the user lives"},
    {"name": "pets", "description": "Pets", "type": "list"},
    {"name": "age", "description": "Age", "type": "number"},
]


@pytest.fixture
def profiles(client):
    clock = MovableClock()
    stores = Stores(client, "db", FernetCipher(Fernet.generate_key()), clock)
    name = unique("p")
    config, _ = stores.put(name, StorePut.model_validate({"profile_fields": FIELDS}))
    yield Profiles(StoreDatabase(client, client, config, clock)), clock
    stores.delete(name)


def test_a_change_of_several_fields_is_one_step_and_each_keeps_its_history(profiles):
    kept, clock = profiles
    assert kept.change("ann", {"city": "Porto", "pets": ["Oscar"]}, CALLER) == ["city", "pets"]
    clock.moment += timedelta(seconds=5)
    assert kept.change("ann", {"city": "Lisbon", "pets": ["Oscar"], "age": None}, CALLER) == [
        "city"
    ]
    view = kept.view("ann")
    assert {n: e.value for n, e in view.fields.items()} == {"city": "Lisbon", "pets": ["Oscar"]}
    history = kept.history("ann", "city").versions
    assert [v.value for v in history] == ["Lisbon", "Porto"]
    assert history[0].updated_at > history[1].updated_at


def test_a_fields_history_keeps_its_newest_versions(profiles):
    kept, _ = profiles
    for n in range(MAX_PROFILE_VERSIONS + 10):
        kept.change("bo", {"age": n}, CALLER)
    versions = kept.history("bo", "age").versions
    assert [v.value for v in versions] == list(range(MAX_PROFILE_VERSIONS + 9, 9, -1))


def test_concurrent_changes_lose_no_version(profiles):
    kept, _ = profiles
    values = [f"city-{n}" for n in range(24)]
    threads = [
        threading.Thread(target=kept.change, args=("cy", {"city": v}, CALLER)) for v in values
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    history = [v.value for v in kept.history("cy", "city").versions]
    assert sorted(history) == sorted(values)
    assert kept.view("cy").fields["city"].value == history[0]


def test_forgetting_removes_the_profile_its_history_and_its_count(profiles):
    kept, _ = profiles
    kept.change("di", {"city": "Nice", "age": 3}, CALLER)
    kept.change("ed", {"city": "Rome"}, CALLER)
    assert kept.holding(["city", "age", "pets"]) == {"city": 2, "age": 1}
    assert kept.forget("di") == 2
    assert kept.view("di").fields == {} and kept.history("di", "city").versions == []
    assert kept.holding(["city", "age"]) == {"city": 1}


def test_texts_are_redacted_when_the_store_redacts(profiles):
    kept, _ = profiles
    kept.change("fi", {"city": "mail me at ann@example.com", "pets": ["+1 415 555 0100"]}, CALLER)
    values = {n: e.value for n, e in kept.view("fi").fields.items()}
    assert values == {"city": "mail me at [email]", "pets": ["[phone]"]}


def test_the_profile_is_in_the_actors_slot(profiles):
    kept, _ = profiles
    actor = kept._keys.actor(actor_bucket("ann"))
    slots = {key_slot(k.encode()) for k in (actor.memories, actor.profile, actor.profile_history)}
    assert len(slots) == 1
