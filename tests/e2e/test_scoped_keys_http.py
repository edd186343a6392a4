"""Scoped API keys over HTTP (docs/keys.md): the key routes, and for every route of
``docs/openapi.json`` a key limited to one store, to reading, or to one actor, probing what it
must not reach. Each such answer equals the answer for a thing that exists nowhere (a
stranger's), a write with a read-only key is 403 ``forbidden``, and a snapshot of the store,
taken with the admin key, is the same after every probe.

The requests are those of the isolation matrix (``tests/e2e/test_isolation.py``: its bodies,
query parameters and answer normalization), sent with a scoped key of organization ``local``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tests.e2e.test_isolation import (
    DECLARED,
    SS,
    TOOLS,
    Answer,
    Target,
    ask,
    call_tool,
    unknown_like,
    uses,
)
from tests.support.common import unique
from tests.support.consolidations import seed_run
from tests.support.stack import Stack

INSTANCE = "local"
READS_BY_POST = {
    ("POST", "/instances/{instance_id}/agent-memory/{store}/memories/search"),
    ("POST", "/instances/{instance_id}/agent-memory/{store}/recall"),
    ("POST", "/instances/{instance_id}/agent-memory/{store}/keyed-memories/search"),
    ("POST", "/instances/{instance_id}/agent-memory/{store}/keyed-memories/namespaces"),
}
STORE_ROUTES = [r for r in DECLARED if "{store}" in r[1]]
WRITES = [r for r in STORE_ROUTES if r[0] != "GET" and r not in READS_BY_POST]


@dataclass
class Scene:
    stack: Stack
    admin: httpx.Client
    store: str  # the store the keys reach
    other: str  # a store of the same instance they do not
    ann_session: str
    bob_session: str
    ann_memory: str
    bob_memory: str
    keys: dict[str, str]
    runs: dict[str, str] = dataclasses.field(default_factory=dict)  # actor -> a run of theirs

    def client(self, key: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.stack.url, headers={"Authorization": f"Bearer {key}"}, timeout=30
        )

    def target(self, **ids: str) -> Target:
        values = {
            "instance": INSTANCE,
            "store": self.store,
            "session": self.ann_session,
            "memory": self.ann_memory,
            "actor": "ann",
            "consolidation": self.runs.get("ann", "con_" + "0" * 20),
            **ids,
        }
        return Target(**values, vector=(1.0, 0.0, 0.0))

    def snapshot(self) -> str:
        """Everything both stores hold, read with the admin key."""
        parts = []
        for store in (self.store, self.other):
            path = f"/instances/{INSTANCE}/agent-memory/{store}"
            for session in self.admin.get(f"{path}/sessions", params={"limit": 100}).json()[
                "sessions"
            ]:
                sid = session["session_id"]
                parts.append(self.admin.get(f"{path}/sessions/{sid}").json()["messages"])
            parts.append(self.admin.get(f"{path}/memories", params={"limit": 100}).json())
        path = f"/instances/{INSTANCE}/agent-memory/{self.store}"
        for run in self.runs.values():
            parts.append(self.admin.get(f"{path}/consolidations/{run}").json())
        return json.dumps(parts, sort_keys=True)


def _key(admin: httpx.Client, **scope: object) -> str:
    answer = admin.post("/keys", json=scope)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["api_key"])


@pytest.fixture(scope="module")
def scene(stack: Stack) -> Iterator[Scene]:
    admin = httpx.Client(
        base_url=stack.url, headers={"Authorization": f"Bearer {stack.api_key}"}, timeout=30
    )
    store, other = unique("scoped"), unique("unscoped")
    for name in (store, other):
        path = f"/instances/{INSTANCE}/agent-memory/{name}"
        assert admin.put(path, json={"dimensions": 3}).status_code == 201
    path = f"/instances/{INSTANCE}/agent-memory/{store}"
    sessions, memories = {}, {}
    for actor in ("ann", "bob"):
        sid = f"{actor}-chat"
        events = {"actor_id": actor, "events": [{"role": "user", "content": f"{actor} here"}]}
        assert admin.post(f"{path}/sessions/{sid}/events", json=events).status_code == 200
        sessions[actor] = sid
        body = {"text": f"{actor} likes tea", "actor_id": actor, "vector": [1, 0, 0]}
        memories[actor] = admin.post(f"{path}/memories", json=body).json()["id"]
    on_store = [{"instance_id": INSTANCE, "store": store}]
    keys = {
        "store": _key(admin, access="write", stores=on_store),
        "read": _key(admin, access="read", stores=on_store),
        "actor": _key(admin, access="write", stores=on_store, actors=["ann"]),
    }
    runs = {actor: seed_run(stack.redis_url, store, actor) for actor in ("ann", "bob")}
    yield Scene(
        stack,
        admin,
        store,
        other,
        sessions["ann"],
        sessions["bob"],
        memories["ann"],
        memories["bob"],
        keys,
        runs,
    )
    for name in (store, other):
        admin.delete(f"/instances/{INSTANCE}/agent-memory/{name}")
    admin.close()


def _same(a: Answer, b: Answer) -> bool:
    return (a.status, a.body) == (b.status, b.body)


@pytest.mark.parametrize("route", STORE_ROUTES, ids=[f"{m} {p}" for m, p in STORE_ROUTES])
def test_a_store_scoped_key_sees_another_store_as_one_that_does_not_exist(scene, route):
    before = scene.snapshot()
    with scene.client(scene.keys["store"]) as client:
        elsewhere = ask(client, route, scene.target(store=scene.other), "store")
        missing = ask(
            client, route, scene.target(store=unknown_like("store", scene.other)), "store"
        )
    assert _same(elsewhere, missing), (elsewhere, missing)
    assert elsewhere.status == 404 and json.loads(elsewhere.body)["error"] == "store_not_found"
    assert scene.snapshot() == before


@pytest.mark.parametrize("route", WRITES, ids=[f"{m} {p}" for m, p in WRITES])
def test_a_read_only_key_cannot_write_anything_and_changes_nothing(scene, route):
    before = scene.snapshot()
    with scene.client(scene.keys["read"]) as client:
        answer = ask(client, route, scene.target(), "store")
    assert answer.status == 403, answer.body
    assert json.loads(answer.body) == {
        "error": "forbidden",
        "message": "This API key is read-only: it cannot write.",
    }
    assert scene.snapshot() == before


@pytest.mark.parametrize(
    "route",
    [r for r in STORE_ROUTES if r[0] == "GET" or r in READS_BY_POST],
    ids=lambda r: f"{r[0]} {r[1]}",
)
def test_a_read_only_key_reads_its_store_as_the_admin_key_does(scene, route):
    with scene.client(scene.keys["read"]) as client:
        scoped = ask(client, route, scene.target(), "store")
    admin = ask(scene.admin, route, scene.target(), "store")
    if route[1].endswith("/usage"):  # each key's request is counted as it comes: one more
        scoped, admin = _without_requests(scoped), _without_requests(admin)
    assert (scoped.status, scoped.body) == (admin.status, admin.body)


def _without_requests(answer):
    body = json.loads(answer.body)
    for day in body["days"]:
        day.pop("requests"), day.pop("requests_by_route")
    return dataclasses.replace(answer, body=json.dumps(body))


ACTOR_PROBES = [
    (r, name)
    for r in STORE_ROUTES
    for name in ("session", "memory", "consolidation")
    if uses(r, name) and r[1] not in (SS + "/events",)
]


@pytest.mark.parametrize(
    ("route", "name"), ACTOR_PROBES, ids=[f"{r[0]} {r[1]} | bob's {n}" for r, n in ACTOR_PROBES]
)
def test_an_actor_scoped_key_sees_another_actors_session_or_memory_as_one_that_does_not_exist(
    scene, route, name
):
    before = scene.snapshot()
    theirs = {
        "session": scene.bob_session,
        "memory": scene.bob_memory,
        "consolidation": scene.runs["bob"],
    }[name]
    with scene.client(scene.keys["actor"]) as client:
        elsewhere = ask(client, route, scene.target(**{name: theirs}), name)
        missing = ask(client, route, scene.target(**{name: unknown_like(name, theirs)}), name)
    assert _same(elsewhere, missing), (elsewhere, missing)
    assert "bob" not in elsewhere.body
    assert scene.snapshot() == before


def test_an_actor_scoped_key_works_with_its_own_actor_and_not_another(scene):
    path = f"/instances/{INSTANCE}/agent-memory/{scene.store}"
    with scene.client(scene.keys["actor"]) as client:
        recall = client.post(f"{path}/recall", json={"session_id": scene.bob_session}).json()
        assert recall["messages"] == [] and recall["actor_id"] == "ann"  # a new conversation
        own = client.post(f"{path}/recall", json={"session_id": scene.ann_session}).json()
        assert [m["content"] for m in own["messages"]] == ["ann here"]
        found = client.post(f"{path}/memories/search", json={"query": "tea", "mode": "keyword"})
        assert [m["actor_id"] for m in found.json()["memories"]] == ["ann"]
        listed = client.get(f"{path}/memories").json()
        assert {m["actor_id"] for m in listed["memories"]} == {"ann"}
        as_bob = client.post(
            f"{path}/memories", json={"text": "x", "actor_id": "bob", "vector": [1, 0, 0]}
        )
        assert as_bob.status_code == 403 and as_bob.json()["error"] == "forbidden"
        into_bobs = client.post(
            f"{path}/sessions/{scene.bob_session}/events",
            json={"events": [{"role": "user", "content": "hijack"}]},
        )
        assert into_bobs.status_code == 409 and "actor 'bob'" not in into_bobs.text
        assert client.delete(f"{path}/actors/bob/memories").status_code == 403
        assert client.get(f"{path}/sessions").status_code == 403
        assert client.get(f"{path}/export/memories").status_code == 403
    bob = scene.admin.get(f"{path}/sessions/{scene.bob_session}").json()
    assert [m["content"] for m in bob["messages"]] == ["bob here"]


def test_keys_are_managed_by_the_admin_key_only_and_their_secrets_are_never_listed(scene):
    admin = scene.admin
    made = admin.post(
        "/keys", json={"name": "ann's phone", "access": "read", "actors": ["ann"]}
    ).json()
    listed = admin.get("/keys").json()["keys"]
    mine = next(k for k in listed if k["key_id"] == made["key_id"])
    assert mine == {k: v for k, v in made.items() if k != "api_key"}
    assert made["api_key"] not in json.dumps(listed)
    with scene.client(made["api_key"]) as client:
        for method, path in (
            ("GET", "/keys"),
            ("POST", "/keys"),
            ("DELETE", f"/keys/{made['key_id']}"),
        ):
            answer = client.request(
                method, path, json={"access": "read"} if method == "POST" else None
            )
            assert answer.status_code == 403 and answer.json()["error"] == "forbidden"
        assert client.get("/agent-memory").status_code == 200
    assert admin.delete(f"/keys/{made['key_id']}").status_code == 204
    with scene.client(made["api_key"]) as client:
        revoked = client.get("/agent-memory")
    assert revoked.status_code == 401
    assert admin.delete(f"/keys/{made['key_id']}").json()["error"] == "key_not_found"


@pytest.mark.parametrize(
    "body",
    [
        {"access": "admin"},
        {"access": "read", "instances": ["no-such-instance"]},
        {"access": "read", "stores": [{"instance_id": "elsewhere", "store": "s"}]},
        {"access": "read", "actors": ["has space"]},
        {"access": "read", "expires_at": "2001-01-01T00:00:00Z"},
        {"access": "read", "extra": 1},
        {},
    ],
)
def test_a_bad_key_request_is_422_and_makes_no_key(scene, body):
    before = len(scene.admin.get("/keys").json()["keys"])
    answer = scene.admin.post("/keys", json=body)
    assert answer.status_code == 422, answer.text
    assert len(scene.admin.get("/keys").json()["keys"]) == before


def test_an_expired_key_is_401_and_a_store_listing_shows_only_the_keys_stores(scene):
    soon = (datetime.now(UTC) + timedelta(seconds=2)).isoformat()
    key = _key(
        scene.admin,
        access="read",
        stores=[{"instance_id": INSTANCE, "store": scene.store}],
        expires_at=soon,
    )
    with scene.client(key) as client:
        names = {s["name"] for s in client.get("/agent-memory").json()["stores"]}
        assert names == {scene.store}
        names = {
            s["name"] for s in client.get(f"/instances/{INSTANCE}/agent-memory").json()["stores"]
        }
        assert names == {scene.store}
        time.sleep(2.2)
        expired = client.get("/agent-memory")
    assert expired.status_code == 401 and "expired" in expired.json()["message"]


def test_a_store_scoped_key_cannot_create_change_or_delete_stores(scene):
    with scene.client(scene.keys["store"]) as client:
        own = client.put(
            f"/instances/{INSTANCE}/agent-memory/{scene.store}", json={"summarize_after": 10}
        )
        assert own.status_code == 403 and own.json()["error"] == "forbidden"
        new = client.put(f"/instances/{INSTANCE}/agent-memory/{unique('new')}", json={})
        assert new.status_code == 404 and new.json()["error"] == "store_not_found"
        assert client.delete(f"/instances/{INSTANCE}/agent-memory/{scene.store}").status_code == 403


def test_an_idempotency_key_of_another_key_is_neither_replayed_nor_revealed(scene):
    """A scoped key's Idempotency-Keys are its own: a write the admin key sent with the same
    key is not answered again to it (which would hand it another actor's data)."""
    path = f"/instances/{INSTANCE}/agent-memory/{scene.store}"
    memory = {"text": "bob's secret", "actor_id": "bob", "vector": [0, 1, 0]}
    key = {"Idempotency-Key": unique("shared")}
    first = scene.admin.post(f"{path}/memories", json=memory, headers=key)
    assert first.status_code == 201
    with scene.client(scene.keys["actor"]) as client:
        replayed = client.post(f"{path}/memories", json=memory, headers=key)
        plain = client.post(f"{path}/memories", json=memory)
        assert (replayed.status_code, replayed.json()) == (plain.status_code, plain.json())
        assert replayed.status_code == 403 and "secret" not in replayed.text
        other = client.post(
            f"{path}/memories", json={"text": "x", "vector": [1, 0, 0]}, headers=key
        )
        # a key of its own: not idempotency_key_reused, not the admin's answer replayed
        assert other.status_code in (200, 201), other.text
        assert "idempotent-replayed" not in other.headers and other.json()["actor_id"] == "ann"
        if other.status_code == 201:
            client.delete(f"{path}/memories/{other.json()['id']}")
    scene.admin.delete(f"{path}/memories/{first.json()['id']}")


def test_superseding_another_actors_memory_is_the_answer_for_a_memory_that_does_not_exist(
    scene,
):
    path = f"/instances/{INSTANCE}/agent-memory/{scene.store}"
    with scene.client(scene.keys["actor"]) as client:
        answers = [
            client.post(
                f"{path}/memories",
                json={"text": "x", "vector": [1, 0, 0], "supersedes": memory_id},
            )
            for memory_id in (scene.bob_memory, unknown_like("memory", scene.bob_memory))
        ]
    texts = [
        a.text.replace(m, "<id>") for a, m in zip(answers, (scene.bob_memory, ""), strict=True)
    ]
    assert answers[0].status_code == answers[1].status_code == 404
    assert answers[0].json()["error"] == "memory_not_found"
    assert texts[0] == answers[1].text.replace(answers[1].json()["message"].split("'")[1], "<id>")


def test_a_read_only_key_cannot_refresh_an_expiry_and_an_actor_key_sees_no_store_counts(scene):
    path = f"/instances/{INSTANCE}/agent-memory/{scene.store}"
    with scene.client(scene.keys["read"]) as client:
        params = {"namespace": "x", "key": "k", "refresh_ttl": "true"}
        assert client.get(f"{path}/keyed-memories", params=params).status_code == 403
        search = client.post(f"{path}/keyed-memories/search", json={"refresh_ttl": True})
        assert search.status_code == 403
        assert client.get(path).json()["counts"] is not None  # a key of whole stores sees them
    with scene.client(scene.keys["actor"]) as client:
        overview = client.get(path).json()
    assert overview["counts"] is None and overview["last_extraction_error"] is None


MCP_STORE_TOOLS = [name for name, spec in TOOLS.items() if "store" in spec.names]
MCP_ACTOR_TOOLS = [
    (name, probed)
    for name, spec in TOOLS.items()
    for probed in ("session", "memory")
    if probed in spec.names and spec.route[1] != SS + "/events"  # 409 by design, as over HTTP
]


@pytest.mark.parametrize("tool", MCP_STORE_TOOLS)
def test_over_mcp_a_store_scoped_key_sees_another_store_as_one_that_does_not_exist(scene, tool):
    before = scene.snapshot()
    with scene.client(scene.keys["store"]) as client:
        elsewhere = call_tool(client, tool, scene.target(store=scene.other), "store")
        nowhere = scene.target(store=unknown_like("store", scene.other))
        missing = call_tool(client, tool, nowhere, "store")
    assert _same(elsewhere, missing), (elsewhere, missing)
    result = json.loads(elsewhere.body)["result"]
    assert result["isError"] and "404 store_not_found" in result["content"][0]["text"]
    assert scene.snapshot() == before


@pytest.mark.parametrize(("tool", "probed"), MCP_ACTOR_TOOLS)
def test_over_mcp_an_actor_scoped_key_sees_another_actors_data_as_missing(scene, tool, probed):
    before = scene.snapshot()
    theirs = scene.bob_session if probed == "session" else scene.bob_memory
    with scene.client(scene.keys["actor"]) as client:
        elsewhere = call_tool(client, tool, scene.target(**{probed: theirs}), probed)
        nowhere = scene.target(**{probed: unknown_like(probed, theirs)})
        missing = call_tool(client, tool, nowhere, probed)
    assert _same(elsewhere, missing), (elsewhere, missing)
    assert "bob here" not in elsewhere.body and "bob likes" not in elsewhere.body
    assert scene.snapshot() == before


@pytest.mark.parametrize("tool", [n for n, s in TOOLS.items() if s.route[0] != "GET"])
def test_over_mcp_a_read_only_key_writes_nothing(scene, tool):
    before = scene.snapshot()
    with scene.client(scene.keys["read"]) as client:
        answer = call_tool(client, tool, scene.target(), "store")
    result = json.loads(answer.body)["result"]
    if TOOLS[tool].route in READS_BY_POST:
        assert not result["isError"], result
    else:
        assert result["isError"] and "403 forbidden" in result["content"][0]["text"]
    assert scene.snapshot() == before
