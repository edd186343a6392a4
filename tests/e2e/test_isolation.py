"""The isolation matrix, over HTTP through the local stack (docs/reliability.md, "Isolation
matrix").

Two organizations (A: the bootstrapped ``local``; B: one of this module's own) with two
instances each, every instance a database of its own, and two stores on each instance: one
whose name every instance shares, and one whose name only that instance has. Every store holds
sessions (each organization has its own actors) and memories of the same actors.

For every route of ``docs/openapi.json`` and every method it does not declare, each probe sends
the same request twice with one id changed: once an id that is real somewhere the caller must
not reach (another organization's instance, store, session, memory or actor; another instance's
store, session or memory; another store's session or memory), once an id of the same length
that exists nowhere. The two answers must be the same: status, headers (but ``Date`` and
``X-Request-Id``, which name the moment and the request) and body,
once the id each request named is replaced by a placeholder (messages name the id that was
asked for, which the caller already knows; they must not tell "exists elsewhere" from "does
not exist"). Where the answer is a success in the caller's own store (creating a store, a
session or a memory there, or an empty search) it is undone before the next request, and the
generated ids and times are replaced by placeholders too. Listings, counts and store-wide
searches are checked against exactly what each store holds, and a full snapshot of both
organizations' data, taken with their own keys, is the same after the matrix and after every
write another organization's key can send.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import pytest

from agent_memory.clock import SystemClock
from agent_memory.control.plane import ControlPlane
from local.bootstrap import start_redis_server
from local.template import load_template
from tests.support.common import ROOT, unique, wait_for
from tests.support.consolidations import seed_run
from tests.support.databases import database_client, on_database
from tests.support.stack import Stack

PER_REQUEST = {"date", "x-request-id"}
"""Headers that differ on every answer: the moment, and the request's id."""

SOON = (datetime.now(UTC) + timedelta(days=30)).isoformat()
"""An expires_at an import takes: within every TTL a store can have."""
DIM = 3
DATABASES = (14, 15)
"""Database numbers of the suite's redis-server for A's second instance and B's first (A's
first is the local stack's own database 0; tests/conftest.py lists who has which number). The
suite's server has no number left for B's second instance: it is database 0 of a redis-server
of this module's own. So A's two instances share a server, A's first and B's first too, and
B's two are on two servers."""
METHODS = ("GET", "PUT", "POST", "DELETE", "PATCH", "HEAD", "OPTIONS")

OPENAPI = json.loads((ROOT / "docs" / "openapi.json").read_text(encoding="utf-8"))
DECLARED = [
    (method.upper(), path)
    for path, operations in OPENAPI["paths"].items()
    for method in operations
    if method.upper() in METHODS
]
UNDECLARED = [(m, p) for p in OPENAPI["paths"] for m in METHODS if (m, p) not in DECLARED]

S = "/instances/{instance_id}/agent-memory/{store}"
SS = S + "/sessions/{session_id}"
M = S + "/memories"
MID = M + "/{memory_id}"
FORGET = S + "/actors/{actor_id}/memories"
SUPERSEDING = ("POST", M + "#supersedes")
IMPORT_SESSION = S + "/import/sessions/{session_id}"
IMPORT_MEMORIES = S + "/import/memories"
KEYED = S + "/keyed-memories"
PROFILE = S + "/actors/{actor_id}/profile"
IMPORT_PROFILES = S + "/import/profiles"
PROFILE_FIELDS = [{"name": "city", "description": "Where the user lives"}]
CONSOLIDATIONS = S + "/consolidations"
CONSOLIDATION = CONSOLIDATIONS + "/{consolidation_id}"
CONSOLIDATE = S + "/actors/{actor_id}/consolidate"
"""POST M with ``supersedes`` naming a memory: a route variant of its own (what follows ``#``
is not part of the path), since the memory id is in the body."""
VARIANTS = [SUPERSEDING]
LLM = {
    "llm_provider": "openai",
    "llm_model": "gpt-4o-mini",
    "llm_api_key": "sk-isolation-test-never-called",
    # nothing is extracted while the module runs
    "extraction_delay_seconds": 3600,
    "session_ttl_seconds": 7200,
}


@dataclass(frozen=True)
class Target:
    """The ids one request names."""

    instance: str
    store: str
    session: str
    memory: str
    actor: str
    vector: tuple[float, ...]
    consolidation: str = "con_" + "0" * 20


def _body(method: str, path: str, t: Target) -> dict[str, Any] | None:
    return {
        ("PUT", S): lambda: {"dimensions": DIM},
        ("POST", SS + "/events"): lambda: {
            "actor_id": t.actor,
            "events": [{"role": "user", "content": "probe: when do we deploy?"}],
        },
        ("POST", S + "/recall"): lambda: {
            "session_id": t.session,
            "actor_id": t.actor,
            "query": "deploys",
        },
        ("POST", M): lambda: {"text": "probe deploys", "actor_id": t.actor, "vector": t.vector},
        SUPERSEDING: lambda: {
            "text": "probe deploys",
            "actor_id": t.actor,
            "vector": t.vector,
            "supersedes": t.memory,
        },
        ("POST", M + "/search"): lambda: {
            "query": "deploys",
            "mode": "hybrid",
            "actor_id": t.actor,
            "query_vector": [1, 0, 0],
            "limit": 100,
        },
        ("PATCH", MID): lambda: {"importance": 0.5},
        ("PATCH", PROFILE): lambda: {"fields": {"city": "Probe town"}},
        ("POST", IMPORT_PROFILES): lambda: {
            "profiles": [
                {
                    "actor_id": t.actor,
                    "fields": {
                        "city": {
                            "value": "Probe town",
                            "updated_at": "2026-01-01T00:00:00Z",
                            "source": {"by": "caller"},
                        }
                    },
                }
            ]
        },
        ("PUT", KEYED): lambda: {"namespace": ["probe"], "key": "k", "value": {"probe": True}},
        ("POST", KEYED + "/search"): lambda: {"namespace_prefix": [], "limit": 100},
        ("POST", KEYED + "/namespaces"): lambda: {},
        ("PUT", IMPORT_SESSION): lambda: {
            "message_count": 1,
            "created_at": "2026-01-01T00:00:00Z",
            "last_event_at": "2026-01-01T00:00:00Z",
            "expires_at": SOON,
            "messages": [
                {
                    "seq": 1,
                    "role": "user",
                    "content": "probe: when do we deploy?",
                    "created_at": "2026-01-01T00:00:00Z",
                }
            ],
        },
        ("POST", IMPORT_MEMORIES): lambda: {
            "memories": [
                {
                    "id": "mem_" + secrets.token_hex(10),
                    "text": "probe deploys",
                    "created_at": "2026-01-01T00:00:00Z",
                    "updated_at": "2026-01-01T00:00:00Z",
                    "expires_at": SOON,
                    "vector": base64.b64encode(np.array(t.vector, "<f4").tobytes()).decode(),
                }
            ],
        },
    }.get((method, path), lambda: None)()


def _query(method: str, path: str, t: Target) -> dict[str, Any] | None:
    return {
        ("GET", M): {"actor_id": t.actor, "limit": 100},
        ("GET", S + "/sessions"): {"limit": 100},
        ("GET", SS): {"recent": 1000},
        ("GET", KEYED): {"namespace": "probe", "key": "k"},
        ("GET", PROFILE + "/history"): {"field": "city"},
        ("GET", CONSOLIDATIONS): {"actor_id": t.actor, "limit": 100},
        ("DELETE", KEYED): {"namespace": "probe", "key": "k"},
    }.get((method, path))


BODY_FIELDS = {
    ("POST", SS + "/events"): {"actor"},
    ("POST", S + "/recall"): {"session", "actor"},
    ("POST", M): {"actor"},
    ("GET", M): {"actor"},
    ("POST", M + "/search"): {"actor"},
    SUPERSEDING: {"memory"},
    ("POST", IMPORT_PROFILES): {"actor"},
    ("GET", CONSOLIDATIONS): {"actor"},
}
"""Ids a route reads from its body or query, besides those of its path."""
PLACEHOLDERS = {
    "instance": "{instance_id}",
    "store": "{store}",
    "session": "{session_id}",
    "memory": "{memory_id}",
    "actor": "{actor_id}",
    "consolidation": "{consolidation_id}",
}
SUCCESS = {
    (("PUT", S), "store"): 201,  # creates a store of the caller's own
    (("POST", SS + "/events"), "session"): 200,  # a new session of the caller's own
    (("POST", SS + "/events"), "actor"): 200,
    (("POST", S + "/recall"), "session"): 200,  # a new conversation: no messages
    (("POST", S + "/recall"), "actor"): 200,
    (("POST", M), "actor"): 201,  # kept, not a duplicate of the other store's memory
    (("GET", M), "actor"): 200,
    (("POST", M + "/search"), "actor"): 200,
    (("DELETE", FORGET), "actor"): 200,  # 0 forgotten
    (("PUT", IMPORT_SESSION), "session"): 200,  # imported as a new session of the caller's own
    (("GET", PROFILE), "actor"): 200,  # an actor of the caller's own store without a profile
    (("GET", PROFILE + "/history"), "actor"): 200,
    (("PATCH", PROFILE), "actor"): 200,  # a profile of the caller's own actor of that id
    (("POST", IMPORT_PROFILES), "actor"): 200,
    (("GET", CONSOLIDATIONS), "actor"): 200,  # no run of the caller's own actor of that id
    (("POST", CONSOLIDATE), "actor"): 202,  # a run of the caller's own actor of that id
}
"""The (route, probed id) pairs whose answer is a success in the caller's own store; every
other probe is a 404."""
NOT_FOUND_CODE = {
    "instance": "instance_not_found",
    "store": "store_not_found",
    "session": "session_not_found",
    "memory": "memory_not_found",
    "consolidation": "consolidation_not_found",
}


def uses(route: tuple[str, str], name: str) -> bool:
    return PLACEHOLDERS[name] in route[1] or name in BODY_FIELDS.get(route, set())


# --- the two organizations' data ----------------------------------------------------------


@dataclass
class Place:
    """One store of one instance, and what it holds."""

    org: str
    instance: str
    store: str
    marker: str
    sessions: dict[str, str] = field(default_factory=dict)  # id -> actor
    messages: dict[str, list[str]] = field(default_factory=dict)  # id -> contents
    memories: dict[str, str | None] = field(default_factory=dict)  # id -> actor (None: none)
    vectors: dict[str, list[float]] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    consolidation: str = ""  # a run of the store's first actor (tests.support.consolidations)

    @property
    def path(self) -> str:
        return f"/instances/{self.instance}/agent-memory/{self.store}"

    def target(self, **ids: str) -> Target:
        """The first session, first memory with an actor, and that actor, of this store."""
        session = next(iter(self.sessions))
        memory = next(m for m, actor in self.memories.items() if actor)
        values = {
            "instance": self.instance,
            "store": self.store,
            "session": session,
            "memory": memory,
            "actor": self.memories[memory] or "",
            "consolidation": self.consolidation,
            **ids,
        }
        return Target(**values, vector=tuple(self.vectors[memory]))


@dataclass
class Org:
    label: str
    org_id: str
    key: str
    instances: tuple[str, str]
    actors: tuple[str, str]


@dataclass
class World:
    stack: Stack
    orgs: dict[str, Org]
    common: str
    only: dict[str, str]  # instance -> the store name only it has
    places: list[Place]
    initial: dict[str, Any] = field(default_factory=dict)
    clients: dict[str, httpx.Client] = field(default_factory=dict)

    def place(self, instance: str, store: str) -> Place:
        return next(p for p in self.places if (p.instance, p.store) == (instance, store))

    def client(self, label: str) -> contextlib.nullcontext[httpx.Client]:
        """The client with organization ``label``'s key, open for the whole module (a new
        ``httpx.Client`` costs tens of milliseconds of CPU: its TLS context)."""
        if label not in self.clients:
            self.clients[label] = self.stack.client(self.orgs[label].key)
        return contextlib.nullcontext(self.clients[label])


def _fill(client: httpx.Client, place: Place, actors: tuple[str, str], shared: str) -> None:
    settings = {"dimensions": DIM, **LLM, "profile_fields": PROFILE_FIELDS}
    answer = client.put(place.path, json=settings)
    assert answer.status_code == 201, answer.text
    answer = client.patch(
        f"{place.path}/actors/{actors[0]}/profile", json={"fields": {"city": place.marker}}
    )
    assert answer.status_code == 200, answer.text
    tag = secrets.token_hex(4)  # not the marker: answers may name the session asked for
    for n, (session, actor) in enumerate(
        [(f"chat-{tag}-1", actors[0]), (f"chat-{tag}-2", actors[1]), (shared, actors[0])]
    ):
        contents = [
            f"{actor} deploys on Fridays ({place.marker}, {session})",
            f"Noted, {n}: Fridays ({place.marker})",
        ]
        events = [
            {"role": role, "content": text}
            for role, text in zip(("user", "assistant"), contents, strict=True)
        ]
        answer = client.post(
            f"{place.path}/sessions/{session}/events", json={"actor_id": actor, "events": events}
        )
        assert answer.status_code == 200, answer.text
        place.sessions[session], place.messages[session] = actor, contents
    owners: list[str | None] = [actors[0], actors[0], actors[1], actors[1], None]
    vectors = [[1, 0, 0], [0, 1, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]
    for n, (actor, vector) in enumerate(zip(owners, vectors, strict=True)):
        text = f"{actor or 'nobody'} deploys from region {n} ({place.marker})"
        body = {"text": text, "vector": vector, "actor_id": actor, "topics": ["deploys"]}
        answer = client.post(f"{place.path}/memories", json=body)
        assert answer.status_code == 201, answer.text
        memory = answer.json()["id"]
        place.memories[memory], place.vectors[memory], place.texts[memory] = actor, vector, text


def _pages(client: httpx.Client, path: str, item: str) -> list[Any]:
    found: list[Any] = []
    offset: int | None = 0
    while offset is not None:
        answer = client.get(path, params={"offset": offset, "limit": 100})
        assert answer.status_code == 200, answer.text
        found += answer.json()[item]
        offset = answer.json()["next_offset"]
    return found


def snapshot(world: World, label: str) -> dict[str, Any]:
    """Everything of organization ``label``'s stores in this module, read with its own key:
    its listings (every store's instance and name), and each store's settings and counts,
    sessions with every message, and memories with their versions."""
    org, mine = world.orgs[label], {(p.instance, p.store) for p in world.places}
    seen: dict[str, Any] = {}
    with world.client(label) as client:
        listing = client.get("/agent-memory").json()
        seen["/agent-memory"] = sorted((s["instance_id"], s["name"]) for s in listing["stores"])
        seen["/keys"] = client.get("/keys").json()
        for instance in org.instances:
            base = f"/instances/{instance}/agent-memory"
            stores = client.get(base).json()["stores"]
            seen[base] = sorted(s["name"] for s in stores)
            for store in sorted(s["name"] for s in stores if (instance, s["name"]) in mine):
                path = f"{base}/{store}"
                seen[path] = client.get(path).json()
                sessions = _pages(client, f"{path}/sessions", "sessions")
                seen[f"{path}/sessions"] = sessions
                for session in sessions:
                    one = f"{path}/sessions/{session['session_id']}"
                    seen[one] = client.get(one, params={"recent": 1000}).json()
                memories = _pages(client, f"{path}/memories", "memories")
                seen[f"{path}/memories"] = memories
                seen[f"{path}/export/profiles"] = client.get(f"{path}/export/profiles").json()
                run = f"{path}/consolidations/{world.place(instance, store).consolidation}"
                seen[run] = client.get(run).json()
                for memory in memories:
                    one = f"{path}/memories/{memory['id']}"
                    seen[one] = client.get(one).json()
    return seen


@pytest.fixture(scope="module")
def second_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a redis-server of this module's own (database 0), stopped after it."""
    database = start_redis_server(tmp_path_factory.mktemp("redis-isolation"), persist=False)
    try:
        yield database.url
    finally:
        database.stop()


@pytest.fixture(scope="module")
def world(stack: Stack, second_server: str) -> Iterator[World]:
    control = ControlPlane(
        database_client(stack.redis_url),
        SystemClock(),
        release_hold_seconds=0,
    )
    org_b, a2, b1, b2 = unique("org-b"), unique("a2"), unique("b1"), unique("b2")
    control.create_organization(org_b)
    _, key_b = control.issue_api_key(org_b)
    registered: list[tuple[str, str]] = []
    world = World(
        stack,
        {
            "A": Org("A", "local", stack.api_key, ("local", a2), (unique("ann"), unique("al"))),
            "B": Org("B", org_b, key_b, (b1, b2), (unique("bob"), unique("bea"))),
        },
        common=unique("common"),
        only={},
        places=[],
    )
    try:
        urls = [on_database(stack.redis_url, db) for db in DATABASES] + [second_server]
        url_of = dict(zip(["local", a2, b1, b2], [stack.redis_url, *urls], strict=True))
        for (org_id, instance), url in zip(
            [("local", a2), (org_b, b1), (org_b, b2)], urls, strict=True
        ):
            control.register_instance(org_id, instance, url, allow_unreachable=True)
            registered.append((org_id, instance))
        for org in world.orgs.values():
            with world.client(org.label) as client:
                for instance in org.instances:
                    world.only[instance] = unique("only")
                    for store in (world.common, world.only[instance]):
                        place = Place(org.label, instance, store, secrets.token_hex(4))
                        _fill(client, place, org.actors, "chat-everywhere")
                        place.consolidation = seed_run(url_of[instance], store, org.actors[0])
                        world.places.append(place)
        world.initial = {label: snapshot(world, label) for label in world.orgs}
        yield world
    finally:
        for place in world.places:
            with world.client(place.org) as client:
                client.delete(place.path)
        for org_id, instance in registered:
            if org_id == "local":
                control.remove_instance(org_id, instance)
        control.delete_organization(org_b)
        for client in world.clients.values():
            client.close()


# --- the probes -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """Who asks (``caller``), which ids (``target``), and which of them is probed."""

    caller: str
    target: Target
    name: str


Probes = dict[str, tuple[str, Callable[[World], Probe]]]


def _cross_org(attacker: str, victim: str) -> Probes:
    def own(w: World) -> str:
        return w.orgs[attacker].instances[0]

    def theirs(w: World, n: int = 0) -> str:
        return w.orgs[victim].instances[n]

    def in_own_store(name: str) -> Callable[[World], Probe]:
        return lambda w: Probe(attacker, w.place(theirs(w), w.common).target(instance=own(w)), name)

    by = f"{attacker}'s key"
    return {
        f"{by}, {victim}'s instance 1": (
            "instance",
            lambda w: Probe(attacker, w.place(theirs(w, 0), w.common).target(), "instance"),
        ),
        f"{by}, {victim}'s instance 2": (
            "instance",
            lambda w: Probe(attacker, w.place(theirs(w, 1), w.common).target(), "instance"),
        ),
        f"{by}, {victim}'s store name on {attacker}'s instance": (
            "store",
            lambda w: Probe(
                attacker, w.place(theirs(w), w.only[theirs(w)]).target(instance=own(w)), "store"
            ),
        ),
        **{
            f"{by}, {victim}'s {name} id in {attacker}'s store of the same name": (
                name,
                in_own_store(name),
            )
            for name in ("session", "memory", "actor", "consolidation")
        },
    }


def _same_org(org: str) -> Probes:
    def instance(w: World, n: int) -> str:
        return w.orgs[org].instances[n]

    def other_instance(name: str) -> Callable[[World], Probe]:
        return lambda w: Probe(
            org, w.place(instance(w, 0), w.common).target(instance=instance(w, 1)), name
        )

    def other_store(name: str) -> Callable[[World], Probe]:
        return lambda w: Probe(
            org, w.place(instance(w, 0), w.common).target(store=w.only[instance(w, 0)]), name
        )

    return {
        f"{org}'s key, instance 1's store name on instance 2": (
            "store",
            lambda w: Probe(
                org,
                w.place(instance(w, 0), w.only[instance(w, 0)]).target(instance=instance(w, 1)),
                "store",
            ),
        ),
        **{
            f"{org}'s key, instance 1's {name} id in instance 2's store of the same name": (
                name,
                other_instance(name),
            )
            for name in ("session", "memory", "consolidation")
        },
        **{
            f"{org}'s key, store X's {name} id in store Y of the same instance": (
                name,
                other_store(name),
            )
            for name in ("session", "memory", "consolidation")
        },
    }


PROBES: Probes = {
    **_cross_org("B", "A"),
    **_cross_org("A", "B"),
    **_same_org("A"),
    **_same_org("B"),
}
MATRIX = [
    pytest.param(route, label, id=f"{route[0]} {route[1]} | {label}")
    for route in DECLARED + VARIANTS + UNDECLARED
    for label, (name, _) in PROBES.items()
    if uses(route, name)
]


def unknown_like(name: str, value: str) -> str:
    """An id of the same length and shape as ``value`` that exists nowhere."""
    if name == "memory":
        return "mem_" + secrets.token_hex(10)
    if name == "consolidation":
        return "con_" + secrets.token_hex(10)
    return ("q" + secrets.token_hex(len(value)))[: len(value)]


_GENERATED = [
    (re.compile(r"mem_[0-9a-f]{20}"), "<memory id>"),
    (re.compile(r"con_[0-9a-f]{20}"), "<consolidation id>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"), "<time>"),
]


@dataclass(frozen=True)
class Answer:
    status: int
    headers: tuple[tuple[str, str], ...]
    body: str


def ask(client: httpx.Client, route: tuple[str, str], t: Target, probed: str) -> Answer:
    """Send ``route`` naming the ids of ``t``; the answer with the probed id in its body
    replaced by ``<probed>``. A success is undone at once (the store, session or memory it
    created is deleted), and its generated ids and times are replaced by placeholders."""
    method, template = route
    path = template.split("#")[0].format(
        instance_id=t.instance,
        store=t.store,
        session_id=t.session,
        memory_id=t.memory,
        actor_id=t.actor,
        consolidation_id=t.consolidation,
    )
    response = client.request(
        method, path, params=_query(method, template, t), json=_body(method, template, t)
    )
    text = response.text.replace(getattr(t, probed), "<probed>")
    headers = {k: v for k, v in response.headers.items() if k not in PER_REQUEST}
    if response.is_success:
        _undo(client, route, path, response)
        for pattern, placeholder in _GENERATED:
            text = pattern.sub(placeholder, text)
        # generated values can vary in length (a time on a whole second has no fraction)
        assert int(headers.pop("content-length")) == len(response.content)
    return Answer(response.status_code, tuple(sorted(headers.items())), text)


def _undo(client: httpx.Client, route: tuple[str, str], path: str, answer: httpx.Response) -> None:
    """Delete what a successful ``route`` at ``path`` created, if it creates anything."""
    if route == ("PUT", S):
        created = path
    elif route == ("POST", SS + "/events"):
        created = path.removesuffix("/events")
    elif route in (("POST", M), SUPERSEDING):
        created = f"{path}/{answer.json()['id']}"
    elif route == ("PUT", IMPORT_SESSION):
        created = path.replace("/import/sessions/", "/sessions/")
    elif route == ("POST", CONSOLIDATE):
        _undo_consolidation(client, path, answer.json()["consolidation_id"])
        return
    elif route in (("PATCH", PROFILE), ("POST", IMPORT_PROFILES)):
        store_path = path.split("/actors/")[0].split("/import/")[0]
        if route[0] == "PATCH":
            actor = answer.json()["actor_id"]
        else:
            actor = json.loads(answer.request.content)["profiles"][0]["actor_id"]
        # the caller's own actor of that id holds no memory: forgetting it forgets the profile
        forgotten = client.delete(f"{store_path}/actors/{actor}/memories")
        assert forgotten.status_code == 200 and forgotten.json()["deleted"] == 0, forgotten.text
        return
    else:
        return
    assert client.delete(created).status_code == 204, created


def _undo_consolidation(client: httpx.Client, path: str, run_id: str) -> None:
    """Wait for the run a probe queued (an actor of the caller's own store without memories:
    no model call) to end, then forget its actor, which forgets the run."""
    store_path = path.split("/actors/")[0]
    run = f"{store_path}/consolidations/{run_id}"
    wait_for(
        lambda: client.get(run).json().get("status") in ("applied", "failed"),
        15,
        "the probe's consolidation run to end",
        show=lambda: client.get(run).text,
    )
    actor = path.split("/actors/")[1].split("/")[0]
    forgotten = client.delete(f"{store_path}/actors/{actor}/memories")
    assert forgotten.status_code == 200 and forgotten.json()["deleted"] == 0, forgotten.text
    assert client.get(run).status_code == 404


@pytest.mark.parametrize(("route", "label"), MATRIX)
def test_an_id_the_caller_must_not_reach_answers_as_one_that_exists_nowhere(
    world: World, route: tuple[str, str], label: str
) -> None:
    probe = PROBES[label][1](world)
    real = getattr(probe.target, probe.name)
    real_instance, real_store = probe.target.instance, probe.target.store
    nowhere = replace(probe.target, **{probe.name: unknown_like(probe.name, real)})
    with world.client(probe.caller) as client:
        elsewhere = ask(client, route, probe.target, probe.name)
        missing = ask(client, route, nowhere, probe.name)
    assert elsewhere == missing
    if route in UNDECLARED:
        if (route[0], MID) in DECLARED and route[1] == M + "/search":
            # the path is also M/{memory_id} with the id "search", which is not a memory id
            assert elsewhere.status == 422 and "path.memory_id" in elsewhere.body
        else:  # API Gateway's own 404 (HEAD: no body)
            assert elsewhere.status == 404
            assert json.loads(elsewhere.body or '{"message": "Not Found"}') == {
                "message": "Not Found"
            }
        return
    expected = 404 if probe.name == "instance" else SUCCESS.get((route, probe.name), 404)
    assert elsewhere.status == expected, elsewhere.body
    if expected == 404:
        assert json.loads(elsewhere.body)["error"] == NOT_FOUND_CODE[probe.name]
    # the answer holds nothing of any store but the one addressed, when it is the caller's
    for place in world.places:
        if (place.org, place.instance, place.store) != (probe.caller, real_instance, real_store):
            assert place.marker not in elsewhere.body, f"{place.path} leaked"


def test_every_route_of_the_document_is_probed() -> None:
    probed = {route for route, _ in (p.values for p in MATRIX)} | KEY_ROUTES
    # the organization's listing and usage name no id: their own tests below
    declared = set(DECLARED) - {("GET", "/agent-memory"), ("GET", "/usage")}
    assert declared <= probed, declared - probed
    with_body = {
        (m.upper(), p)
        for p, ops in OPENAPI["paths"].items()
        for m, op in ops.items()
        if "requestBody" in op
    }
    with_body -= KEY_ROUTES  # probed with bodies of their own (the keys test below)
    assert with_body <= {r for r in DECLARED if _body(*r, _ANY) is not None}


def test_every_route_that_takes_an_api_key_is_probed() -> None:
    """The matrix enumerates docs/openapi.json, and the MCP tools below cover POST /mcp; a
    route of template.yaml that runs the authorizer (so may serve an organization's data) and
    is in neither would go unprobed."""
    template = load_template(ROOT / "template.yaml")
    routes = {
        (str(event["Properties"]["Method"]).upper(), event["Properties"]["Path"])
        for resource in template["Resources"].values()
        if resource.get("Type") == "AWS::Serverless::Function"
        for event in (resource["Properties"].get("Events") or {}).values()
        if event.get("Type") == "HttpApi"
        and (event["Properties"].get("Auth") or {}).get("Authorizer") != "NONE"
    }
    covered = {*DECLARED, *MCP_ROUTES}
    assert routes <= covered, (
        f"{sorted(routes - covered)} take an API key, but no probe of the isolation matrix "
        "reaches them: describe them in docs/openapi.json, or give them probes here"
    )
    assert covered <= routes


_ANY = Target("i", "s", "x", "mem_" + "0" * 20, "a", (1.0, 0.0, 0.0), "con_" + "0" * 20)


# --- the MCP tools (POST /mcp) -----------------------------------------------------------

MCP_ROUTES = [("POST", "/mcp"), ("GET", "/mcp"), ("DELETE", "/mcp")]
"""POST /mcp runs the tools below; GET and DELETE answer 405 whatever is sent (docs/mcp.md)."""
MCP_HEADERS = {
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-06-18",
}


@dataclass(frozen=True)
class Tool:
    """An MCP tool: the API route it calls, the ids it names, and its arguments for ``t``."""

    route: tuple[str, str]
    names: frozenset[str]
    arguments: Callable[[Target], dict[str, Any]]


_PLACE = frozenset({"instance", "store"})
TOOLS = {
    "list_memory_stores": Tool(
        ("GET", "/instances/{instance_id}/agent-memory"),
        frozenset({"instance"}),
        lambda t: {"instance_id": t.instance},
    ),
    "memory_add_messages": Tool(
        ("POST", SS + "/events"),
        _PLACE | {"session", "actor"},
        lambda t: {
            "instance_id": t.instance,
            "store": t.store,
            "session_id": t.session,
            "actor_id": t.actor,
            "messages": [{"role": "user", "content": "probe: deploys?"}],
        },
    ),
    "memory_recall": Tool(
        ("POST", S + "/recall"),
        _PLACE | {"session", "actor"},
        lambda t: {
            "instance_id": t.instance,
            "store": t.store,
            "session_id": t.session,
            "actor_id": t.actor,
            "query": "deploys",
        },
    ),
    "memory_search": Tool(
        ("POST", M + "/search"),
        _PLACE | {"actor"},
        lambda t: {
            "instance_id": t.instance,
            "store": t.store,
            "query": "deploys",
            "mode": "keyword",
            "actor_id": t.actor,
            "limit": 100,
        },
    ),
    "memory_add": Tool(
        ("POST", M),
        _PLACE | {"actor"},
        lambda t: {
            "instance_id": t.instance,
            "store": t.store,
            "text": "probe deploys",
            "actor_id": t.actor,
        },
    ),
    "memory_forget": Tool(
        ("DELETE", MID),
        _PLACE | {"memory"},
        lambda t: {"instance_id": t.instance, "store": t.store, "memory_id": t.memory},
    ),
}
MCP_MATRIX = [
    pytest.param(tool, label, id=f"POST /mcp {tool} | {label}")
    for tool, spec in TOOLS.items()
    for label, (name, _) in PROBES.items()
    if name in spec.names
]


def call_tool(client: httpx.Client, tool: str, t: Target, probed: str) -> Answer:
    """Call ``tool`` through POST /mcp naming the ids of ``t``; the answer as ``ask`` gives it
    (what the tool created is deleted through the API, in the same way)."""
    spec = TOOLS[tool]
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": spec.arguments(t)},
    }
    response = client.post("/mcp", headers=MCP_HEADERS, json=request)
    assert response.status_code == 200, response.text
    text = response.text.replace(getattr(t, probed), "<probed>")
    headers = {k: v for k, v in response.headers.items() if k not in PER_REQUEST}
    result = response.json()["result"]
    if not result["isError"]:
        if spec.route == ("POST", SS + "/events"):
            path = SS.format(instance_id=t.instance, store=t.store, session_id=t.session)
            assert client.delete(path).status_code == 204, path
        for pattern, placeholder in _GENERATED:
            text = pattern.sub(placeholder, text)
        assert int(headers.pop("content-length")) == len(response.content)
    return Answer(response.status_code, tuple(sorted(headers.items())), text)


@pytest.mark.parametrize(("tool", "label"), MCP_MATRIX)
def test_an_id_the_caller_must_not_reach_answers_as_one_that_exists_nowhere_over_mcp(
    world: World, tool: str, label: str
) -> None:
    probe = PROBES[label][1](world)
    real = getattr(probe.target, probe.name)
    nowhere = replace(probe.target, **{probe.name: unknown_like(probe.name, real)})
    with world.client(probe.caller) as client:
        elsewhere = call_tool(client, tool, probe.target, probe.name)
        missing = call_tool(client, tool, nowhere, probe.name)
    assert elsewhere == missing
    result = json.loads(elsewhere.body)["result"]
    route = TOOLS[tool].route
    expected = 404 if probe.name == "instance" else SUCCESS.get((route, probe.name), 404)
    if tool == "memory_add" and expected == 201:
        # the tool sends no vector, and the stores have no embedding model
        assert result["isError"] and "422 vector_required" in result["content"][0]["text"]
    elif expected == 404:
        assert result["isError"], result
        code = NOT_FOUND_CODE[probe.name]
        assert f"KiviDB API error 404 {code}: " in result["content"][0]["text"]
    else:
        assert not result["isError"], result
    for place in world.places:
        if (place.org, place.instance, place.store) != (
            probe.caller,
            probe.target.instance,
            probe.target.store,
        ):
            assert place.marker not in elsewhere.body, f"{place.path} leaked"


def test_the_mcp_server_has_the_tools_the_matrix_probes_and_no_other(world: World) -> None:
    answers = set()
    for label in world.orgs:
        with world.client(label) as client:
            listed = client.post(
                "/mcp",
                headers=MCP_HEADERS,
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            )
            assert {t["name"] for t in listed.json()["result"]["tools"]} == set(TOOLS)
            for method in ("GET", "DELETE"):  # 405 whatever the caller
                response = client.request(method, "/mcp", headers=MCP_HEADERS)
                headers = {k: v for k, v in response.headers.items() if k not in PER_REQUEST}
                answers.add((method, response.status_code, tuple(sorted(headers.items()))))
    assert {(m, status) for m, status, _ in answers} == {("GET", 405), ("DELETE", 405)}
    assert len(answers) == 2


# --- listings, counts and store-wide searches -----------------------------------------------


def test_store_listings_show_only_the_callers_own_stores(world: World) -> None:
    for org in world.orgs.values():
        mine = {(p.instance, p.store) for p in world.places if p.org == org.label}
        theirs = {(p.instance, p.store) for p in world.places if p.org != org.label}
        with world.client(org.label) as client:
            listing = client.get("/agent-memory")
            assert listing.status_code == 200
            assert listing.json()["unreachable"] == []
            listed = {(s["instance_id"], s["name"]) for s in listing.json()["stores"]}
            assert mine <= listed and {i for i, _ in listed} <= set(org.instances)
            for instance in org.instances:
                stores = client.get(f"/instances/{instance}/agent-memory").json()["stores"]
                names = {s["name"] for s in stores}
                assert {s for i, s in mine if i == instance} <= names
                assert {s["instance_id"] for s in stores} == {instance}
                assert not names & {world.only[i] for i, _ in theirs}
        if org.label == "B":  # a new organization: nothing but its own stores
            assert listed == mine
    # the methods GET /agent-memory does not declare: API Gateway's 404 for every caller
    for method in (m for m, p in UNDECLARED if p == "/agent-memory"):
        answers = set()
        for label in world.orgs:
            with world.client(label) as client:
                response = client.request(method, "/agent-memory")
            headers = {k: v for k, v in response.headers.items() if k not in PER_REQUEST}
            answers.add((response.status_code, tuple(sorted(headers.items())), response.text))
        assert len(answers) == 1 and next(iter(answers))[0] == 404, method


def test_the_organizations_usage_counts_only_its_own_stores(world: World) -> None:
    """Another organization's writes change nothing of one's usage, and one's usage holds
    nothing of the other's stores."""

    def usage(label: str) -> dict[str, Any]:
        with world.client(label) as client:
            answer = client.get("/usage")
        assert answer.status_code == 200, answer.text
        return answer.json()

    for label, other in (("A", "B"), ("B", "A")):
        before = usage(label)
        place = next(p for p in world.places if p.org == other)
        with world.client(other) as client:
            probe = {"events": [{"role": "user", "content": "usage probe"}]}
            assert (
                client.post(f"{place.path}/sessions/usage-probe/events", json=probe).status_code
                == 200
            )
            assert client.delete(f"{place.path}/sessions/usage-probe").status_code == 204
        after = usage(label)
        assert after["now"] == before["now"]
        today_before, today_after = before["days"][-1], after["days"][-1]
        assert today_after["messages_added"] == today_before["messages_added"]
        assert today_after["requests"] == today_before["requests"] + 1  # the second GET /usage
        for theirs in (p for p in world.places if p.org == other):
            assert theirs.marker not in json.dumps(after)


def test_each_store_counts_lists_and_searches_only_its_own_data(world: World) -> None:
    for place in world.places:
        with world.client(place.org) as client:
            store = client.get(place.path).json()
            assert store["counts"] == {"sessions": 3, "memories": 5, "waiting_for_extraction": 3}
            sessions = _pages(client, f"{place.path}/sessions", "sessions")
            assert {s["session_id"]: s["actor_id"] for s in sessions} == place.sessions
            for session, contents in place.messages.items():
                view = client.get(f"{place.path}/sessions/{session}").json()
                assert [m["content"] for m in view["messages"]] == contents
            listed = _pages(client, f"{place.path}/memories", "memories")
            assert {m["id"]: m["text"] for m in listed} == place.texts
            assert client.get(f"{place.path}/memories").json()["total"] == 5
            for actor in {a for a in place.memories.values() if a}:
                own = {m for m, a in place.memories.items() if a == actor}
                answer = client.get(f"{place.path}/memories", params={"actor_id": actor}).json()
                assert {m["id"] for m in answer["memories"]} == own
                assert answer["total"] == len(own)
            # without actor_id: every actor of this store, and nothing of any other store,
            # although the other store of the instance has memories of the same actors
            for mode in ("keyword", "semantic", "hybrid"):
                body = {"query": "deploys", "mode": mode, "limit": 100, "query_vector": [1, 1, 1]}
                found = client.post(f"{place.path}/memories/search", json=body)
                assert found.status_code == 200, found.text
                assert {m["id"] for m in found.json()["memories"]} == set(place.memories), mode


def test_one_session_id_in_every_store_is_a_session_of_each_store(world: World) -> None:
    for place in world.places:
        with world.client(place.org) as client:
            view = client.get(f"{place.path}/sessions/chat-everywhere").json()
            assert [m["content"] for m in view["messages"]] == place.messages["chat-everywhere"]
            recalled = client.post(
                f"{place.path}/recall", json={"session_id": "chat-everywhere", "query": "deploys"}
            ).json()
            assert [m["content"] for m in recalled["messages"]] == (
                place.messages["chat-everywhere"]
            )
            assert {m["id"] for m in recalled["memories"]} == {
                m for m, a in place.memories.items() if a == place.sessions["chat-everywhere"]
            }


# --- writes with another organization's key -------------------------------------------------

KEY_ROUTES = {("POST", "/keys"), ("GET", "/keys"), ("DELETE", "/keys/{key_id}")}
"""The caller's own organization's keys: no id of another's is named (probed apart, below)."""
WRITES = [r for r in DECLARED if r[0] in ("PUT", "POST", "PATCH", "DELETE") and r not in KEY_ROUTES]


@pytest.mark.parametrize(("attacker", "victim"), [("B", "A"), ("A", "B")])
def test_another_organizations_writes_change_nothing(
    world: World, attacker: str, victim: str
) -> None:
    """Every write route, with the attacker's key, at the victim's instances: for every store,
    each of its sessions, memories and actors. Nothing but 404, and the victim's data as it
    was (the attacker's own namespace is the matrix's, which undoes its successes)."""
    before = snapshot(world, victim)
    statuses = []
    with world.client(attacker) as client:
        for place in (p for p in world.places if p.org == victim):
            sessions, memories = list(place.sessions), list(place.memories)
            for n, memory in enumerate(memories):
                session = sessions[n % len(sessions)]
                actor = place.memories[memory] or place.sessions[session]
                t = replace(place.target(session=session, memory=memory), actor=actor)
                statuses += [ask(client, route, t, "instance").status for route in WRITES]
    assert set(statuses) == {404}
    assert snapshot(world, victim) == before


@pytest.mark.parametrize(("attacker", "victim"), [("B", "A"), ("A", "B")])
def test_another_organizations_keys_are_out_of_reach_as_keys_that_do_not_exist(
    world: World, attacker: str, victim: str
) -> None:
    """The key routes name no organization: an attacker's admin key lists only its own keys,
    revokes another's key as one that does not exist, and cannot scope a key to another's
    instance any more than to an instance that exists nowhere."""
    with world.client(victim) as client:
        theirs = [k["key_id"] for k in client.get("/keys").json()["keys"]]
    before = snapshot(world, victim)
    with world.client(attacker) as client:
        own = client.get("/keys").json()["keys"]
        assert not {k["key_id"] for k in own} & set(theirs)
        for key_id in theirs:
            gone = client.delete(f"/keys/{key_id}")
            nowhere = client.delete(f"/keys/key_{secrets.token_hex(6)}")
            assert gone.status_code == nowhere.status_code == 404
            assert gone.json()["error"] == nowhere.json()["error"] == "key_not_found"
        for instance in world.orgs[victim].instances:
            scoped = client.post("/keys", json={"access": "read", "instances": [instance]})
            unknown = client.post(
                "/keys", json={"access": "read", "instances": [unknown_like("instance", instance)]}
            )
            assert scoped.status_code == unknown.status_code == 422
            assert scoped.text.replace(instance, "<i>") == unknown.text.replace(
                unknown.json()["details"][0]["problem"].split()[-1], "<i>"
            )
    assert snapshot(world, victim) == before


def test_nothing_of_either_organization_changed_during_the_module(world: World) -> None:
    """Last in the module: the whole matrix, successes undone, left both organizations as
    they were."""
    for label in world.orgs:
        assert snapshot(world, label) == world.initial[label]
