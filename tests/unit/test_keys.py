"""Key layout: injective, hash-tagged per session, and every store key under the store prefix."""

import itertools
import re

import pytest
from hypothesis import given, strategies as st
from pydantic import TypeAdapter, ValidationError

from agent_memory.database.keys import MEMORY_PARTITIONS, PREFIX, ControlKeys, StoreKeys
from agent_memory.models import SessionId, StoreName

STORES = ["acme", "acme.ops", "a-b", "a_b", "team", "team_a", "x" * 64]
SESSIONS = ["s1", "ops:s1", "team:a_b", "team_a:b", "team:a:b", "a@b.c", "u:1@2", ":", "@", "."]


def _slot_tag(key: str) -> str:
    start = key.index("{")
    return key[start + 1 : key.index("}", start)]


def test_store_names_cannot_hold_a_colon_so_store_and_session_never_blur():
    with pytest.raises(ValidationError):
        TypeAdapter(StoreName).validate_python("acme:ops")
    TypeAdapter(SessionId).validate_python("ops:s1")


def test_every_store_and_session_pair_gets_distinct_keys():
    seen: dict[str, tuple[str, str]] = {}
    for store, session in itertools.product(STORES, SESSIONS):
        for key in StoreKeys(store, "abc123").session(session).all():
            assert key not in seen, f"{key} from {(store, session)} and {seen[key]}"
            seen[key] = (store, session)


def test_session_keys_parse_back_to_their_store_and_session():
    pattern = re.compile(r"kividb:mem:([^:]+):abc123:session:\{([^}]+)\}:(meta|messages)")
    for store, session in itertools.product(STORES, SESSIONS):
        for key in StoreKeys(store, "abc123").session(session).all():
            found = pattern.fullmatch(key)
            assert found is not None
            assert found.group(1, 2) == (store, session)


def test_keys_of_one_session_share_one_hash_tag():
    keys = StoreKeys("acme", "abc123").session("team:a:b").all()
    assert {_slot_tag(k) for k in keys} == {"team:a:b"}


def test_store_indexes_share_the_store_hash_tag():
    keys = StoreKeys("acme", "abc123")
    assert {_slot_tag(k) for k in keys.session_indexes()} == {"acme"}
    assert len(set(keys.session_indexes())) == 4


def test_incarnations_of_one_store_never_share_a_key():
    old, new = StoreKeys("acme", "abc123"), StoreKeys("acme", "abc124")
    assert not set(old.session("s").all()) & set(new.session("s").all())
    assert not new.sessions.startswith(old.all_pattern.removesuffix("*"))
    with pytest.raises(ValueError):
        StoreKeys("acme", "a:b")


def test_every_key_of_a_store_matches_its_scan_pattern_and_no_other_store_does():
    acme, acme_ops = StoreKeys("acme", "abc123"), StoreKeys("acme.ops", "abc123")
    own = [*acme.session_indexes(), *acme.session("s1").all()]
    prefix = acme.all_pattern.removesuffix("*")
    assert all(k.startswith(prefix) for k in own)
    other = [acme_ops.sessions, *acme_ops.session("s1").all()]
    assert not any(k.startswith(prefix) for k in other)


def test_all_keys_use_the_memory_prefix_and_the_registry_is_not_a_store():
    assert StoreKeys.registry.startswith(PREFIX)
    with pytest.raises(ValidationError):
        TypeAdapter(StoreName).validate_python("@stores")


def test_control_keys_live_outside_the_memory_namespace():
    assert not ControlKeys.api_key("ab").startswith(PREFIX)
    assert ControlKeys.org_keys("a") != ControlKeys.org_keys("a:b")


def test_actor_keys_share_the_actor_tag_and_no_actor_has_its_own_bucket():
    from agent_memory.database.keys import NO_ACTOR, actor_bucket

    store = StoreKeys("acme", "abc123")
    keys = store.actor(actor_bucket("team:a@b"))
    assert {_slot_tag(k) for k in keys.all()} == {"team:a@b"}
    assert actor_bucket(None) == NO_ACTOR
    with pytest.raises(ValidationError):
        TypeAdapter(SessionId).validate_python(NO_ACTOR)  # no actor id can spell it
    assert not set(store.actor("a").all()) & set(store.actor(NO_ACTOR).all())
    assert {_slot_tag(k) for k in store.memory_indexes()} == {"acme"}
    assert not set(store.actor("s1").all()) & set(store.session("s1").all())


def test_partitioned_memory_indexes_have_one_tag_each_and_meet_no_other_key():
    store = StoreKeys("acme", "abc123", MEMORY_PARTITIONS)
    parts = store.memory_partitions()
    assert len(parts) == MEMORY_PARTITIONS
    tags = [{_slot_tag(k) for k in part.all()} for part in parts]
    assert tags == [{f"acme/{p}"} for p in range(MEMORY_PARTITIONS)]
    # "/" is in neither the store nor the session/actor alphabet: no other tag can be one.
    with pytest.raises(ValidationError):
        TypeAdapter(StoreName).validate_python("acme/1")
    with pytest.raises(ValidationError):
        TypeAdapter(SessionId).validate_python("acme/1")
    everything = {k for part in parts for k in part.all()}
    assert len(everything) == 4 * MEMORY_PARTITIONS
    other = StoreKeys("acme.ops", "abc123", MEMORY_PARTITIONS)
    assert not everything & set(other.memory_indexes())
    assert not everything & set(store.session_indexes() + store.actor("acme/1").all())
    assert all(k.startswith(store.all_pattern[:-1]) for k in everything)


def test_one_partition_is_the_layout_of_before_partitions():
    """A store created before partitions reads its indexes where they always were."""
    base = "kividb:mem:acme:abc123:{acme}"
    assert StoreKeys("acme", "abc123").memory_indexes() == [
        f"{base}:memories",
        f"{base}:memories:expiry",
        f"{base}:memories:owner",
        f"{base}:memories:superseded",
        f"{base}:memories:actors",
    ]


@given(st.lists(st.from_regex(r"mem_[0-9a-f]{20}", fullmatch=True), max_size=200))
def test_every_id_has_one_partition_and_grouping_keeps_each_id_once(ids: list[str]):
    store = StoreKeys("acme", "abc123", MEMORY_PARTITIONS)
    groups = store.by_partition(ids)
    assert sorted(i for _, members in groups for i in members) == sorted(set(ids))
    for part, members in groups:
        assert all(store.memory_partition(i) is part for i in members)
    assert [p for p, _ in groups] == [p for p in store.memory_partitions() if p in dict(groups)]


def test_tag_sets_have_tags_of_their_own_and_meet_no_partition():
    store = StoreKeys("acme", "abc123", MEMORY_PARTITIONS)
    sets = {store.actor_tag_set(f"{n:04x}") for n in range(65536)}
    assert len(sets) == 65536
    assert {_slot_tag(k) for k in sets} == {f"acme/t{n:04x}" for n in range(65536)}
    assert not sets & set(store.memory_indexes() + store.session_indexes())
    assert not {_slot_tag(k) for k in sets} & {_slot_tag(k) for k in store.memory_indexes()}


def test_an_actor_has_a_key_for_every_part_a_kept_index_may_take():
    from agent_memory.database.keys import ActorKeys
    from agent_memory.search.snapshot import MAX_PARTS

    keys = ActorKeys("kividb:mem:s:0123456789ab:", "ann")
    assert len(keys.index_parts) == ActorKeys.INDEX_PARTS == MAX_PARTS
    assert keys.all()[4:] == keys.index_parts  # a removal's script deletes them
    assert len(set(keys.all())) == MAX_PARTS + 4  # none is another's
