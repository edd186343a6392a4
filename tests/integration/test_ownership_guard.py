"""The ownership marker, checked where a database is used: the functions' clients of an
instance check it on every new connection (``Instance.guard``), write it on the first use of a
database registered while it could not be reached, and answer a database that is not the
registration's as a stranger's instance (404), logging why for the operator.

Databases of the test server used here: 13 and 14."""

from __future__ import annotations

import logging

import pytest
import redis

from agent_memory.database.client import redis_client
from agent_memory.database.keys import InstanceKeys
from agent_memory.errors import InstanceNotFound
from tests.support.common import unique
from tests.support.databases import ON_CLUSTER, database_client, on_database
from tests.support.handlers import build, invoke

NOWHERE = {
    "error": "instance_not_found",
    "message": "Instance '{}' does not exist in your organization.",
}


@pytest.fixture
def spare(redis_url: str) -> str:
    """An empty database of the test server, emptied again after the test."""
    url = on_database(redis_url, 13)
    database = database_client(url)
    _empty(database)
    yield url
    _empty(database)


def _empty(database: redis.Redis) -> None:
    keys = list(database.scan_iter(match="kividb:mem:*", count=1000))
    for key in keys:
        database.delete(key)


def _unmarked(tenant, url: str) -> str:
    """An instance of ``tenant``'s organization at ``url``, registered as if the database had
    been out of reach (its marker taken out again)."""
    instance = unique("db")
    tenant.control.register_instance(tenant.org_id, instance, url, allow_unreachable=True)
    database_client(url).delete(InstanceKeys.owner)
    redis_client.cache_clear()  # a new container: no connection checked yet
    return instance


def _get(tenant, instance: str, name: str = "list_instance_stores"):
    event = build(name, tenant)
    path = event["rawPath"].replace(f"/instances/{tenant.instance_id}/", f"/instances/{instance}/")
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    return invoke(name, event)


def test_the_first_use_of_a_database_registered_unreached_writes_its_marker(
    tenant, function_env, spare
):
    instance = _unmarked(tenant, spare)
    token = tenant.control.instance(tenant.org_id, instance).token
    status, body, _ = _get(tenant, instance)
    assert (status, body) == (200, {"stores": [], "next_cursor": None})
    marker = database_client(spare).get(InstanceKeys.owner)
    assert marker == f"{tenant.org_id}/{instance}/{token}"


def test_a_database_with_data_of_an_unknown_owner_is_refused_as_a_strangers(
    tenant, function_env, spare, caplog
):
    instance = _unmarked(tenant, spare)
    database_client(spare).hset("kividb:mem:@stores", "theirs", "{}")
    with caplog.at_level(logging.WARNING):
        status, body, _ = _get(tenant, instance)
    assert status == 404
    assert body == {k: v.format(instance) for k, v in NOWHERE.items()}
    assert database_client(spare).get(InstanceKeys.owner) is None  # nothing claimed
    [warning] = [r for r in caplog.records if "instance refused" in r.getMessage()]
    assert "data of an unknown owner" in warning.getMessage()


def test_another_registrations_marker_refuses_every_route_with_a_strangers_404(
    tenant, function_env, spare, caplog
):
    instance = _unmarked(tenant, spare)
    database_client(spare).set(InstanceKeys.owner, "other-org/their-db/0123456789abcdef")
    for name in (
        "list_instance_stores",
        "get_store",
        "list_sessions",
        "recall",
        "add_memory",
        "search_memories",
        "put_store",
    ):
        with caplog.at_level(logging.WARNING):
            status, body, _ = _get(tenant, instance, name)
        assert (status, body) == (404, {k: v.format(instance) for k, v in NOWHERE.items()})
    warning = next(r for r in caplog.records if "instance refused" in r.getMessage())
    assert "other-org/their-db" in warning.getMessage()
    assert "0123456789abcdef" not in warning.getMessage()  # the token stays out of logs
    status, body, _ = invoke("list_stores", build("list_stores", tenant))
    assert status == 200 and instance not in str(body)


def test_a_released_marker_of_the_same_registration_is_not_a_pass(tenant, function_env, spare):
    instance = _unmarked(tenant, spare)
    token = tenant.control.instance(tenant.org_id, instance).token
    marker = f"{tenant.org_id}/{instance}/{token}/released"
    database_client(spare).set(InstanceKeys.owner, marker)
    status, _, _ = _get(tenant, instance)
    assert status == 404


@pytest.mark.skipif(ON_CLUSTER, reason="a cluster client is checked when it is made")
def test_the_check_is_made_again_on_a_new_connection(tenant, function_env, spare):
    instance = _unmarked(tenant, spare)
    assert _get(tenant, instance)[0] == 200
    database = database_client(spare)
    database.set(InstanceKeys.owner, "other-org/their-db/0123456789abcdef")
    assert _get(tenant, instance)[0] == 200  # the connection checked stays in use...
    database.client_kill_filter(_type="normal", skipme=True)  # ...until it is gone
    assert _get(tenant, instance)[0] in (404, 503)  # 503: the killed connection, noticed once
    assert _get(tenant, instance)[0] == 404


def test_the_guard_raises_a_strangers_error_in_the_core(spare):
    """The same rule for the binary clients of memories: InstanceNotFound, raised by the
    database layer."""
    from datetime import UTC, datetime

    from agent_memory.control.models import Instance
    from agent_memory.database.client import database_errors

    database_client(spare).set(InstanceKeys.owner, "a/b/c")
    instance = Instance("mine", "me", spare, datetime.now(UTC), "token")
    with pytest.raises(InstanceNotFound), database_errors():
        redis_client(spare, binary=True, guard=instance.guard).get("anything")
