"""``KeyScope``: what a scoped key reaches (agent_memory.scopes), as the authorizer carries it."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from agent_memory.errors import Forbidden, ValidationFailed
from agent_memory.scopes import KeyScope, StoreRef, actor_for, require_whole_store

ids = st.sampled_from(["i1", "i2", "i3"])
names = st.sampled_from(["s1", "s2", "s3"])
actors = st.sampled_from(["ann", "bob", "cy"])
scopes = st.builds(
    KeyScope,
    access=st.sampled_from(["read", "write"]),
    instances=st.none() | st.lists(ids, min_size=1, max_size=3).map(tuple),
    stores=st.none()
    | st.lists(st.builds(StoreRef, instance_id=ids, store=names), min_size=1, max_size=3).map(
        tuple
    ),
    actors=st.none() | st.lists(actors, min_size=1, max_size=3).map(tuple),
    expires_at=st.none() | st.integers(0, 2**45),
)


@given(scope=scopes)
def test_a_scope_reads_back_from_the_text_the_authorizer_carries(scope):
    assert KeyScope.from_text(scope.to_text()) == scope


@given(scope=scopes, instance=ids, store=names)
def test_a_store_is_reached_only_on_an_instance_reached_and_as_the_limits_say(
    scope, instance, store
):
    reached = scope.allows_store(instance, store)
    assert not reached or scope.allows_instance(instance)
    expected = (scope.instances is None or instance in scope.instances) and (
        scope.stores is None or StoreRef(instance_id=instance, store=store) in scope.stores
    )
    assert reached == expected


@given(scope=scopes)
def test_only_a_write_key_without_store_or_actor_limits_manages_stores(scope):
    assert scope.manages_stores == (
        scope.access == "write" and scope.stores is None and scope.actors is None
    )


def test_an_actor_limited_key_names_its_actor_or_none_and_no_other():
    one = KeyScope(actors=("ann",))
    assert actor_for(one, None) == "ann" and actor_for(one, "ann") == "ann"
    with pytest.raises(Forbidden, match="does not reach actor 'bob'"):
        actor_for(one, "bob")
    two = KeyScope(actors=("ann", "bob"))
    with pytest.raises(ValidationFailed) as caught:
        actor_for(two, None)
    assert caught.value.details == [
        {"field": "actor_id", "problem": "required with a key limited to several actors"}
    ]
    assert actor_for(None, None) is None and actor_for(KeyScope(), "zed") == "zed"
    assert not one.allows_actor(None)  # memories and sessions of no actor are out of reach


def test_only_actor_limited_keys_are_kept_from_whole_store_routes():
    require_whole_store(None, "export")
    require_whole_store(
        KeyScope(access="read", stores=(StoreRef(instance_id="i", store="s"),)), "x"
    )
    with pytest.raises(Forbidden, match="cannot export"):
        require_whole_store(KeyScope(actors=("ann",)), "export")


def test_unknown_fields_in_a_carried_scope_are_refused():
    with pytest.raises(ValueError):
        KeyScope.from_text('{"access": "write", "admin": true}')
