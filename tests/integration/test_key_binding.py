"""A database that changes hands: its stored provider API keys stay with the organization,
instance and store they were stored for, and ``tools.admin register-instance`` does not hand
another organization's agent-memory data over without ``--adopt-existing-data``.

The instance database is a ``redis-server`` of this module's own (the suite's server holds the
control plane); its store embeds through a loopback provider that records the key it is sent.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from cryptography.fernet import Fernet

from agent_memory.database.keys import PREFIX, InstanceKeys, StoreKeys
from local.bootstrap import Database, low_free_port, start_redis_server
from tests.support.common import unique
from tests.support.databases import Tenant, database_client
from tests.support.handlers import build, invoke
from tests.support.model_servers import RawHTTPServer, response_bytes, send
from tools import admin

KEY = "sk-bound-0123456789abcdef"
DIMS = 4
EMBEDDING = response_bytes(
    200, json.dumps({"data": [{"index": 0, "embedding": [1.0] * DIMS}]}).encode()
)


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    started = start_redis_server(tmp_path / "instance", persist=False, port=low_free_port())
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def embeddings() -> Iterator[RawHTTPServer]:
    with RawHTTPServer(send(EMBEDDING)) as server:
        yield server


@dataclasses.dataclass
class Org:
    """An organization of the test, as the handlers see it (``build`` takes a ``Tenant``)."""

    tenant: Tenant

    def call(self, name: str, store: str, body: dict | None = None):
        return invoke(name, build(name, self.tenant, store, body=body))


def admin_run(redis_url: str, capsys, *command: str) -> tuple[int, str, str]:
    status = admin.main(["--control-url", redis_url, "--release-hold", "0", *command])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def orgs(tenant, function_env, monkeypatch, redis_url, capsys) -> Iterator[tuple[Org, Org]]:
    """Two organizations of the control plane: A (the tenant) and B, each with an API key."""
    monkeypatch.setenv("KIVIDB_ALLOW_PRIVATE_ENDPOINTS", "1")
    other = unique("org-b")
    tenant.control.create_organization(other)
    key_id, api_key = tenant.control.issue_api_key(other)
    b = dataclasses.replace(tenant, org_id=other, api_key=api_key, key_id=key_id)
    yield Org(tenant), Org(b)
    with contextlib.suppress(Exception):
        tenant.control.delete_organization(other)


def store_body(embeddings: RawHTTPServer) -> dict:
    return {
        "embed_provider": "custom",
        "embed_model": "m",
        "embed_base_url": embeddings.url,
        "embed_api_key": KEY,
        "dimensions": DIMS,
    }


MEMORY = {"text": "Deploys on Fridays", "actor_id": "user-7"}


def test_another_organization_gets_the_database_only_on_purpose_and_never_its_keys(
    orgs, database, embeddings, redis_url, capsys
):
    a, b = orgs
    instance = unique("moving")
    a.tenant.instance_id = b.tenant.instance_id = instance
    assert (
        admin_run(redis_url, capsys, "register-instance", a.tenant.org_id, instance, database.url)[
            0
        ]
        == 0
    )
    assert a.call("put_store", "notes", store_body(embeddings))[0] == 201
    status, kept, _ = a.call("add_memory", "notes", MEMORY)
    assert status == 201, kept
    assert [r.headers["authorization"] for r in embeddings.requests] == [f"Bearer {KEY}"]
    assert admin_run(redis_url, capsys, "remove-instance", a.tenant.org_id, instance)[0] == 0

    # B is refused the database while it holds A's data, and nothing is registered
    status, out, err = admin_run(
        redis_url, capsys, "register-instance", b.tenant.org_id, instance, database.url
    )
    assert (status, out) == (1, "")
    assert err.startswith("instance_conflict: Database redis://localhost:")
    assert "already holds agent-memory data" in err and a.tenant.org_id not in err
    assert "--adopt-existing-data" in err
    assert a.tenant.control.instances(b.tenant.org_id) == []
    assert b.call("get_store", "notes")[0] == 404

    # adopted on purpose: B sees the data, but A's provider key is not B's to use
    status, out, _ = admin_run(
        redis_url,
        capsys,
        "register-instance",
        b.tenant.org_id,
        instance,
        database.url,
        "--adopt-existing-data",
    )
    assert status == 0, out
    status, view, _ = b.call("get_store", "notes")
    assert (status, view["has_embed_api_key"], view["counts"]["memories"]) == (200, True, 1)
    status, body, _ = b.call("add_memory", "notes", {**MEMORY, "text": "Likes tea"})
    assert (status, body["error"]) == (409, "stored_key_unreadable"), body
    assert "embed_api_key" in body["message"] and "another organization" in body["message"]
    assert len(embeddings.requests) == 1  # the key was never sent for B
    assert b.call("get_store", "notes")[1]["counts"]["memories"] == 1  # nothing kept
    # B's own key, sent again, is B's
    assert b.call("put_store", "notes", {"embed_api_key": KEY + "-b"})[0] == 200
    status, body, _ = b.call("add_memory", "notes", {**MEMORY, "text": "Likes tea"})
    assert (status, body["duplicate"]) == (200, True)  # the provider's one vector: A's memory
    assert embeddings.requests[-1].headers["authorization"] == f"Bearer {KEY}-b"


def test_an_organization_registers_its_own_database_again_and_an_empty_one_freely(
    orgs, database, redis_url, capsys
):
    a, b = orgs
    org, instance = a.tenant.org_id, unique("again")
    assert admin_run(redis_url, capsys, "register-instance", org, instance, database.url)[0] == 0
    a.tenant.instance_id = instance
    assert a.call("put_store", "notes", {"dimensions": DIMS})[0] == 201
    # the same registration again, and a re-registration while its marker is held: its own
    assert admin_run(redis_url, capsys, "register-instance", org, instance, database.url)[0] == 0
    assert (
        admin.main(
            ["--control-url", redis_url, "--release-hold", "30", "remove-instance", org, instance]
        )
        == 0
    )
    capsys.readouterr()
    marker = redis.Redis.from_url(database.url, decode_responses=True).get(InstanceKeys.owner)
    assert marker.startswith(f"{org}/{instance}/") and marker.endswith("/released")
    assert admin_run(redis_url, capsys, "register-instance", org, instance, database.url)[0] == 0
    # an empty database (a marker alone is no data) is anyone's
    a.call("delete_store", "notes")
    client = redis.Redis.from_url(database.url, decode_responses=True)
    assert list(client.scan_iter(match=PREFIX + "*")) == [InstanceKeys.owner]
    assert admin_run(redis_url, capsys, "remove-instance", org, instance)[0] == 0
    status, out, err = admin_run(
        redis_url, capsys, "register-instance", b.tenant.org_id, unique("b"), database.url
    )
    assert (status, err) == (0, ""), out


def test_a_key_stored_before_keys_were_bound_is_refused_with_a_clear_409(
    tenant, function_env, monkeypatch, embeddings, client, secret_key
):
    monkeypatch.setenv("KIVIDB_ALLOW_PRIVATE_ENDPOINTS", "1")
    name = unique("legacy")
    status, _, _ = invoke(
        "put_store", build("put_store", tenant, name, body=store_body(embeddings))
    )
    assert status == 201
    database = database_client(tenant.url)
    stored = json.loads(database.hget(StoreKeys.registry, name))
    # as the previous version stored it: a bare Fernet token of the key file's own key
    stored["embed_api_key_ciphertext"] = Fernet(secret_key.encode()).encrypt(KEY.encode()).decode()
    database.hset(StoreKeys.registry, name, json.dumps(stored))
    status, body, _ = invoke("add_memory", build("add_memory", tenant, name, body=MEMORY))
    assert (status, body["error"]) == (409, "stored_key_unreadable")
    assert body["message"] == (
        "The store's embed_api_key was stored by an earlier version, before API keys were bound "
        "to their organization, instance and store, and is not used any more; send it again "
        "with PUT."
    )
    assert embeddings.requests == []
    invoke("delete_store", build("delete_store", tenant, name))
