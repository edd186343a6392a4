"""Scoped keys in the control plane (``ApiKeys.create`` / ``authenticate``) on a real server:
the scope comes back with the organization in one lookup, only the key's hash is stored, an
expired key is refused, and listing never shows a secret."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
import redis

from agent_memory.control.api_keys import hash_api_key
from agent_memory.control.key_models import KeyCreate
from agent_memory.control.plane import ControlPlane
from agent_memory.database.keys import ControlKeys
from agent_memory.errors import Unauthorized, ValidationFailed
from tests.support.clocks import MovableClock
from tests.support.common import unique


@pytest.fixture
def plane(redis_url) -> Iterator[tuple[ControlPlane, MovableClock, str]]:
    clock = MovableClock()
    control = ControlPlane(redis.Redis.from_url(redis_url, decode_responses=True), clock)
    org = unique("scoped-org")
    control.create_organization(org)
    yield control, clock, org
    control.delete_organization(org)


def test_a_scoped_key_authenticates_with_its_scope_and_is_stored_only_as_a_hash(plane, redis_url):
    control, _, org = plane
    body = KeyCreate.model_validate(
        {"access": "read", "actors": ["ann"], "name": "phone"}, strict=False
    )
    created = control.create_api_key(org, body)
    principal = control.authenticate(created.api_key)
    assert principal.org_id == org and principal.key_id == created.key_id
    assert principal.scope is not None and principal.scope.actors == ("ann",)
    assert not principal.scope.writes
    raw = redis.Redis.from_url(redis_url, decode_responses=True)
    stored = raw.hgetall(ControlKeys.api_key(hash_api_key(created.api_key)))
    everything = " ".join(
        str(v)
        for k in raw.scan_iter(match="kividb:control:*")
        if raw.type(k) == "hash"
        for v in raw.hgetall(k).values()
    )
    assert created.api_key not in everything and stored["org_id"] == org
    listed = {i.key_id: i for i in control.list_api_keys(org)}
    assert (
        listed[created.key_id].scope == principal.scope and listed[created.key_id].name == "phone"
    )


def test_an_expired_key_is_refused_and_an_expiry_in_the_past_is_not_accepted(plane):
    control, clock, org = plane
    expires = clock.moment + timedelta(hours=1)
    body = KeyCreate.model_validate({"access": "write", "expires_at": expires}, strict=False)
    created = control.create_api_key(org, body)
    clock.moment += timedelta(minutes=59)
    assert control.authenticate(created.api_key).scope is not None
    clock.moment += timedelta(minutes=1)
    with pytest.raises(Unauthorized, match="expired"):
        control.authenticate(created.api_key)
    past = KeyCreate.model_validate({"access": "write", "expires_at": clock.moment}, strict=False)
    with pytest.raises(ValidationFailed):
        control.create_api_key(org, past)


def test_a_scope_naming_another_organizations_instance_is_refused(plane):
    control, _, org = plane
    body = KeyCreate.model_validate({"access": "read", "instances": ["not-ours"]}, strict=False)
    with pytest.raises(ValidationFailed, match="not-ours"):
        control.create_api_key(org, body)
    assert [i.key_id for i in control.list_api_keys(org)] == []
