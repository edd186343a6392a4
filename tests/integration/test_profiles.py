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

from agent_memory.answers import wire_bytes
from agent_memory.database.keys import actor_bucket
from agent_memory.errors import ValidationFailed
from agent_memory.memories.profile_models import (
    MAX_PROFILE_VERSIONS,
    ImportedProfile,
    ProfileSource,
)
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
    values = [f"city-{n}" for n in range(MAX_PROFILE_VERSIONS)]
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


# --- export and import -------------------------------------------------------------------------


def _every_profile(kept: Profiles, budget: int, limit: int = 10) -> tuple[list, int]:
    """Every profile of the export, page by page, and how many pages it took."""
    seen, cursor, pages = [], None, 0
    while True:
        page = kept.export_page(cursor, limit, budget)
        assert page.profiles or page.next_cursor is None or pages == 0
        assert wire_bytes(page) <= budget or len(page.profiles) == 1
        seen += page.profiles
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            return seen, pages


def test_export_pages_fit_the_budget_miss_no_actor_and_import_back_the_same(profiles, client):
    """40 actors, each with a city of 900 quotes (about 1.8 kB as carried) and a history: a
    budget of 8 kB cuts every scan step, and the cursor that resumes inside a step misses no
    one; the pages imported into another store export the same."""
    kept, clock = profiles
    actors = [f"actor-{n:02d}" for n in range(40)]
    for n, actor in enumerate(actors):
        kept.change(actor, {"city": '"' * 900 + str(n), "age": n}, CALLER)
        clock.moment += timedelta(milliseconds=3)
        kept.change(actor, {"city": f"town {n}", "pets": [f"pet {n}", "✨"]}, CALLER)
    whole, one_page = _every_profile(kept, 10_000_000, limit=100)
    cut, pages = _every_profile(kept, 8_000)
    assert sorted({p.actor_id for p in cut}) == actors == sorted(p.actor_id for p in whole)
    assert pages > 4 * one_page
    assert {p.actor_id: p for p in cut} == {p.actor_id: p for p in whole}
    first = {p.actor_id: p for p in whole}["actor-07"]
    assert [v.value for v in first.history["city"]] == ["town 7", '"' * 900 + "7"]
    assert first.fields["age"].value == 7

    stores = Stores(client, "db", FernetCipher(Fernet.generate_key()), clock)
    other = unique("p-to")
    config, _ = stores.put(other, StorePut.model_validate({"profile_fields": FIELDS}))
    try:
        target = Profiles(StoreDatabase(client, client, config, clock))
        for profile in whole:
            target.import_profile(ImportedProfile.model_validate(profile.model_dump(mode="json")))
            target.import_profile(ImportedProfile.model_validate(profile.model_dump(mode="json")))
        again, _ = _every_profile(target, 10_000_000, limit=100)
        assert {p.actor_id: p for p in again} == {p.actor_id: p for p in whole}
        assert target.holding(["city", "age"]) == {"city": 40, "age": 40}
    finally:
        stores.delete(other)


def test_an_import_replaces_only_the_fields_it_names(profiles):
    kept, _ = profiles
    kept.change("fay", {"city": "Porto", "age": 30}, CALLER)
    piece = kept.export_page(None, 10, 10_000_000).profiles[0].model_dump(mode="json")
    kept.change("fay", {"city": "Braga", "age": 31, "pets": ["Rex"]}, CALLER)
    kept.import_profile(
        ImportedProfile.model_validate(
            {
                "actor_id": "fay",
                "fields": {"city": piece["fields"]["city"]},
                "history": {"city": piece["history"]["city"]},
            }
        )
    )
    view = kept.view("fay")
    assert {n: e.value for n, e in view.fields.items()} == {
        "city": "Porto",
        "age": 31,
        "pets": ["Rex"],
    }
    assert [v.value for v in kept.history("fay", "city").versions] == ["Porto"]
    assert [v.value for v in kept.history("fay", "age").versions] == [31, 30]


def test_a_cursor_not_of_the_export_is_refused(profiles):
    kept, _ = profiles
    for cursor in ("x", "1|", "-3", "0|ann|bob", "１"):
        with pytest.raises(ValidationFailed):
            kept.export_page(cursor, 10, 10_000_000)
