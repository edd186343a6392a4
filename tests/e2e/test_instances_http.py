"""Instances through the local stack, as a client sees them: a listing with an instance that
cannot be reached, and what ``tools.admin`` remove-instance and delete-org change for API calls.
The tool runs in this process (``tools.admin.main``) against the stack's control database.
The API calls use plain httpx: they check exact statuses and bodies of other organizations'
keys and removed instances, as the wire shows them.

Databases of the test server used here: 10 and 11 (0 is the stack's own)."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from agent_memory.clock import SystemClock
from agent_memory.control.plane import ControlPlane
from tests.support.common import unique
from tests.support.databases import database_client, on_database
from tests.support.stack import Stack
from tools import admin

DEAD = "redis://127.0.0.1:1/0"
UNREACHABLE = "The database cannot be reached right now; retry in a moment."


def run_admin(stack: Stack, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    status = admin.main(["--control-url", stack.redis_url, "--release-hold", "0", *args])
    captured = capsys.readouterr()
    return status, captured.out + captured.err


@pytest.fixture
def control(stack: Stack) -> ControlPlane:
    return ControlPlane(
        database_client(stack.redis_url),
        SystemClock(),
        release_hold_seconds=0,
    )


def new_org(stack: Stack, control: ControlPlane, capsys) -> tuple[str, str]:
    org = unique("org")
    assert run_admin(stack, capsys, "create-org", org)[0] == 0
    return org, control.issue_api_key(org)[1]


def test_the_listing_is_200_with_an_unreachable_instance_named(stack, api, store, capsys):
    dead = unique("dead")
    assert (
        run_admin(stack, capsys, "register-instance", "local", dead, DEAD, "--allow-unreachable")[0]
        == 0
    )
    try:
        response = api.get("/agent-memory")
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["unreachable"] == [{"instance_id": dead, "message": UNREACHABLE}]
        name = store.rsplit("/", 1)[1]
        assert ("local", name) in [(s["instance_id"], s["name"]) for s in body["stores"]]
    finally:
        assert run_admin(stack, capsys, "remove-instance", "local", dead)[0] == 0
    assert api.get("/agent-memory").json()["unreachable"] == []


def test_the_stacks_database_is_refused_to_another_organization(stack, control, capsys):
    org, _ = new_org(stack, control, capsys)
    port = urlsplit(stack.redis_url).port
    try:
        status, output = run_admin(
            stack, capsys, "register-instance", org, unique("db"), f"redis://localhost:{port}"
        )
        assert status == 1
        assert output == (
            f"instance_conflict: Database redis://localhost:{port}/0 is registered to another "
            "organization (or was released by one less than a minute ago); a database can "
            "belong to one organization only.\n"
        )
        assert control.instances(org) == []
    finally:
        control.delete_organization(org)


def test_a_removed_instance_is_a_404_and_its_database_can_be_registered_again(
    stack, control, capsys
):
    org, key = new_org(stack, control, capsys)
    newcomer, newcomer_key = new_org(stack, control, capsys)
    instance, url = unique("db"), on_database(stack.redis_url, 10)
    try:
        assert run_admin(stack, capsys, "register-instance", org, instance, url)[0] == 0
        status, output = run_admin(stack, capsys, "remove-instance", org, instance)
        assert status == 0 and "its data stays in" in output
        with stack.client(key) as client:
            response = client.get(f"/instances/{instance}/agent-memory")
            assert response.status_code == 404
            assert response.json() == {
                "error": "instance_not_found",
                "message": f"Instance '{instance}' does not exist in your organization.",
            }
            assert client.get("/agent-memory").json() == {
                "stores": [],
                "unreachable": [],
                "next_cursor": None,
            }
        taken = unique("db")
        assert run_admin(stack, capsys, "register-instance", newcomer, taken, url)[0] == 0
        with stack.client(newcomer_key) as client:
            assert client.get(f"/instances/{taken}/agent-memory").status_code == 200
    finally:
        control.delete_organization(org)
        control.delete_organization(newcomer)


def test_a_deleted_organizations_key_is_a_401_at_once_and_its_data_stays(stack, control, capsys):
    org, key = new_org(stack, control, capsys)
    instance, url = unique("db"), on_database(stack.redis_url, 11)
    store = unique("store")
    assert run_admin(stack, capsys, "register-instance", org, instance, url)[0] == 0
    with stack.client(key) as client:
        assert client.put(f"/instances/{instance}/agent-memory/{store}", json={}).status_code == 201
        assert [s["name"] for s in client.get("/agent-memory").json()["stores"]] == [store]
        status, output = run_admin(stack, capsys, "delete-org", org)
        assert status == 0
        assert output.startswith(f"organization {org} deleted: 1 API key(s) revoked")
        for response in (
            client.get("/agent-memory"),
            client.get(f"/instances/{instance}/agent-memory/{store}"),
        ):
            assert response.status_code == 401
            assert response.json() == {
                "error": "unauthorized",
                "message": "The API key is not valid or has been revoked.",
            }
    # the database kept the store: another organization is refused it while it holds that
    # data, and finds it only when it adopts the data on purpose (else empty it first)
    later, later_key = new_org(stack, control, capsys)
    given = unique("db")
    try:
        status, output = run_admin(stack, capsys, "register-instance", later, given, url)
        assert status == 1 and output.startswith("instance_conflict: Database ")
        assert "already holds agent-memory data" in output and org not in output
        assert control.instances(later) == []
        adopt = "--adopt-existing-data"
        assert run_admin(stack, capsys, "register-instance", later, given, url, adopt)[0] == 0
        with stack.client(later_key) as client:
            listed = client.get(f"/instances/{given}/agent-memory").json()["stores"]
            assert [s["name"] for s in listed] == [store]
            assert client.delete(f"/instances/{given}/agent-memory/{store}").status_code == 204
    finally:
        control.delete_organization(later)
