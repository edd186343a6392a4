"""Instances as the routes see them: ``GET /agent-memory`` with instances it cannot reach, and
the effects of removing an instance or deleting an organization, through the handlers."""

import random
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from agent_memory.clock import SystemClock
from agent_memory.control.models import Instance
from agent_memory.database.client import redis_client
from agent_memory.providers.secrets import FernetCipher
from agent_memory.stores.listing import list_organization_stores
from agent_memory.stores.registry import Stores
from local.server import LambdaContext
from tests.support.common import unique
from tests.support.handlers import API, build, invoke, sample

DEAD = "redis://127.0.0.1:1/0"
UNREACHABLE = "The database cannot be reached right now; retry in a moment."


@pytest.fixture
def store(tenant, function_env):
    name = unique("store")
    assert invoke("put_store", build("put_store", tenant, name))[0] == 201
    yield name
    invoke("delete_store", build("delete_store", tenant, name))


@pytest.fixture
def silent() -> Iterator[int]:
    """A loopback port that accepts connections and never answers (a stalled database)."""
    with socket.socket() as listener:
        for _ in range(100):
            port = random.randrange(20000, 55000)
            try:
                listener.bind(("127.0.0.1", port))
                break
            except OSError:
                continue
        listener.listen(64)
        yield port


def test_the_listing_lists_what_it_reaches_and_names_what_it_cannot(tenant, store):
    dead = unique("dead")
    tenant.control.register_instance(tenant.org_id, dead, DEAD, allow_unreachable=True)
    status, body, _ = invoke("list_stores", build("list_stores", tenant))
    assert status == 200
    assert body["unreachable"] == [{"instance_id": dead, "message": UNREACHABLE}]
    assert store in [s["name"] for s in body["stores"]]
    assert {s["instance_id"] for s in body["stores"]} == {tenant.instance_id}
    # once the dead instance is removed, the listing is whole again
    tenant.control.remove_instance(tenant.org_id, dead)
    status, body, _ = invoke("list_stores", build("list_stores", tenant))
    assert status == 200 and body["unreachable"] == []
    assert store in [s["name"] for s in body["stores"]]


def test_an_organization_whose_instances_all_answer_has_an_empty_unreachable(tenant, store):
    status, body, _ = invoke("list_stores", build("list_stores", tenant))
    assert status == 200 and body["unreachable"] == []


def test_stalled_instances_are_waited_for_together(tenant, store, silent):
    stalled = [unique("stalled") for _ in range(3)]
    with ThreadPoolExecutor(3) as pool:  # each registration waits 2 s for its marker
        list(
            pool.map(
                lambda pair: tenant.control.register_instance(
                    tenant.org_id,
                    pair[1],
                    f"redis://127.0.0.1:{silent}/{pair[0]}",
                    allow_unreachable=True,
                ),
                enumerate(stalled, start=1),
            )
        )
    started = time.monotonic()
    status, body, _ = invoke("list_stores", build("list_stores", tenant))
    elapsed = time.monotonic() - started
    assert status == 200
    assert sorted(u["instance_id"] for u in body["unreachable"]) == sorted(stalled)
    assert {u["message"] for u in body["unreachable"]} == {UNREACHABLE}
    assert store in [s["name"] for s in body["stores"]]
    assert elapsed < 4.0  # 2 s socket timeout each, at once; one after another: 6 s or more


def test_the_listing_waits_for_instances_at_most_its_budget(tenant, silent, secret_key):
    url = f"redis://127.0.0.1:{silent}/0"
    instance = Instance("stalled", tenant.org_id, url, datetime.now(UTC))
    cipher = FernetCipher(secret_key.encode("ascii"))
    started = time.monotonic()
    listing = list_organization_stores(
        [instance],
        lambda i: Stores(redis_client(i.url), i.instance_id, cipher, SystemClock()),
        wait_seconds=0.3,
    )
    assert time.monotonic() - started < 1.0
    assert listing.stores == []
    assert [u.model_dump() for u in listing.unreachable] == [
        {
            "instance_id": "stalled",
            "message": "The database did not answer within 0.3 s; retry in a moment.",
        }
    ]


def test_the_listing_is_a_503_only_when_the_control_database_is_down(
    tenant, function_env, monkeypatch
):
    status, body, _ = invoke("list_stores", build("list_stores", tenant))
    assert status == 200
    monkeypatch.setenv("KIVIDB_CONTROL_URL", DEAD)
    status, body, headers = invoke("list_stores", build("list_stores", tenant))
    assert status == 503 and body["error"] == "database_unavailable"
    assert headers["Retry-After"] == "1"


def test_a_removed_instance_is_a_404_and_its_data_stays(tenant, store, client):
    assert invoke("get_store", build("get_store", tenant, store))[0] == 200
    tenant.control.remove_instance(tenant.org_id, tenant.instance_id)
    status, body, _ = invoke("get_store", build("get_store", tenant, store))
    assert status == 404 and body == {
        "error": "instance_not_found",
        "message": f"Instance '{tenant.instance_id}' does not exist in your organization.",
    }
    status, body, _ = invoke("list_stores", build("list_stores", tenant))
    assert status == 200 and body == {"stores": [], "unreachable": [], "next_cursor": None}
    # the store is still in the database: registered again, it is back as it was
    tenant.control.register_instance(
        tenant.org_id, tenant.instance_id, tenant.url, allow_unreachable=True
    )
    assert invoke("get_store", build("get_store", tenant, store))[0] == 200


def test_a_deleted_organizations_keys_are_refused_at_once(tenant, function_env):
    event = sample("authorizer")
    event["headers"]["authorization"] = f"Bearer {tenant.api_key}"
    authorizer = API.authorizer.load()
    assert authorizer(event, LambdaContext("authorizer"))["context"]["org_id"] == tenant.org_id
    tenant.control.delete_organization(tenant.org_id)
    answer = authorizer(event, LambdaContext("authorizer"))
    assert answer["context"] == {
        "error": "unauthorized",
        "message": "The API key is not valid or has been revoked.",
    }
