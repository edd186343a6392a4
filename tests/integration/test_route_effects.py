"""What each writing route tells and counts: the webhook events it queues and the usage counters
it raises, as the table below says, for every writing route of template.yaml.

A writing route is one whose method is not GET and that is not a read sent by POST (a search,
recall: ``Api(reads=True)``). The table is the contract (docs/webhooks.md, docs/routes.md
"Usage"); a route added to the template without a row fails the first test, and a route that
does not do what its row says fails the second, whichever road its handler took."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from agent_memory.clock import SystemClock
from agent_memory.control.usage import COUNTERS, UsageStore
from agent_memory.webhooks.models import EVENT_TYPES
from agent_memory.webhooks.outbox import Outbox
from local.server import LambdaContext
from tests.support.common import unique
from tests.support.databases import database_client
from tests.support.handlers import API, HANDLERS, build, invoke

NO_EVENTS: tuple[str, ...] = ()
EFFECTS: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    # route: (webhook events, usage counters, why when both are empty)
    "put_store": (NO_EVENTS, (), "a store's settings, answered to the key that changed them"),
    "delete_store": (("store.deleted",), (), ""),
    "rotate_webhook_secret": (NO_EVENTS, (), "the store's settings: the new secret is answered"),
    "add_events": (NO_EVENTS, ("messages_added",), ""),
    "pop_message": (
        NO_EVENTS,
        (),
        "takes back the newest message, which no run has read yet (a run holds the session)",
    ),
    "delete_session": (("session.deleted",), (), ""),
    "extract_session": (
        NO_EVENTS,
        (),
        "queues a run: the run tells extraction.completed or .failed and counts extraction_runs",
    ),
    "import_session": (NO_EVENTS, ("messages_added",), ""),
    "add_memory": (("memory.created",), ("memories_added",), ""),
    "update_memory": (("memory.updated",), (), ""),
    "delete_memory": (("memory.deleted",), ("memories_deleted",), ""),
    "forget_actor": (("memory.deleted",), ("memories_deleted",), ""),
    "import_memories": (NO_EVENTS, ("memories_added",), ""),
    "update_profile": (("profile.updated",), ("profile_updates",), ""),
    "consolidate_actor": (
        NO_EVENTS,
        (),
        "queues a run: the run tells consolidation.proposed, .completed or .failed and counts "
        "consolidation_runs and its model tokens",
    ),
    "apply_consolidation": (("consolidation.completed",), (), ""),
    "discard_consolidation": (NO_EVENTS, (), "a proposal thrown away: no memory changes"),
    "revert_consolidation": (
        NO_EVENTS,
        (),
        "undoes a run: its record says what changed (the memories it replaced current again, "
        "its own closed), and no memory is added or removed",
    ),
    "restore_memory": (
        ("memory.created", "memory.superseded"),
        ("memories_added", "memories_superseded"),
        "",
    ),
    "import_profiles": (NO_EVENTS, (), "a restore of profiles, told and counted when first set"),
    "put_keyed_memory": (
        NO_EVENTS,
        (),
        "keyed memories are the caller's own values under its own keys: nothing is extracted, "
        "superseded or told",
    ),
    "delete_keyed_memory": (NO_EVENTS, (), "as put_keyed_memory"),
    "create_key": (NO_EVENTS, (), "the organization's keys, not a store's"),
    "delete_key": (NO_EVENTS, (), "the organization's keys, not a store's"),
}
NOT_A_ROUTE_OF_ITS_OWN = {"mcp_handler": "the MCP server calls the routes above over HTTP"}


def _writing_routes() -> set[str]:
    found = set()
    for route in API.routes:
        name = route.function.handler.split(".")[0]
        if route.method == "GET" or name in NOT_A_ROUTE_OF_ITS_OWN:
            continue
        app = HANDLERS[name].module().app
        if not app._reads:
            found.add(name)
    return found


def test_every_writing_route_of_the_template_has_a_row_and_every_row_a_reason_or_an_effect():
    assert _writing_routes() == set(EFFECTS)
    for name, (events, counters, why) in EFFECTS.items():
        assert set(events) <= set(EVENT_TYPES) and set(counters) <= set(COUNTERS), name
        assert events or counters or why, f"{name}: say why it tells and counts nothing"


@pytest.fixture
def hooked(tenant, function_env, monkeypatch, redis_url):
    """A store with an endpoint for every event (never called: no sender runs here) and a
    language model (so that extraction can be asked for), the control database's outbox and
    usage, and a way to read what a route queued and counted."""
    monkeypatch.setenv("KIVIDB_ALLOW_PRIVATE_ENDPOINTS", "1")
    monkeypatch.setenv("KIVIDB_SCHEDULER", "local")
    name = unique("hooked")
    settings = {
        **json.loads(build("put_store", tenant)["body"]),
        "llm_provider": "custom",
        "llm_model": "m",
        "llm_base_url": "http://127.0.0.1:9/v1",
        "webhooks": [{"url": "http://127.0.0.1:9/hook", "events": list(EVENT_TYPES)}],
    }
    status, body, _ = invoke("put_store", build("put_store", tenant, name, body=settings))
    assert status == 201, body
    control = database_client(redis_url)
    outbox, usage = Outbox(control, SystemClock()), UsageStore(control, SystemClock())

    def effects(route: str, event: dict) -> tuple[set[str], set[str]]:
        before_events = {
            d.webhook_id for d in outbox.log(tenant.org_id, tenant.instance_id, name).deliveries
        }
        before = _counts(usage, tenant, name)
        status, body, _ = invoke(route, event)
        assert 200 <= status < 300, (route, status, body)
        told = {
            d.event
            for d in outbox.log(tenant.org_id, tenant.instance_id, name).deliveries
            if d.webhook_id not in before_events
        }
        after = _counts(usage, tenant, name)
        return told, {c for c in COUNTERS if after[c] > before[c]}

    yield tenant, name, effects
    invoke("delete_store", build("delete_store", tenant, name))


def _counts(usage: UsageStore, tenant, store: str) -> dict[str, int]:
    day = usage.days(tenant.org_id, [datetime.now(UTC).date()], (tenant.instance_id, store))[0]
    return {c: int(getattr(day, c)) for c in COUNTERS}


def _with_path(event: dict, old: str, new: str) -> dict:
    path = event["rawPath"].replace(old, new)
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    return event


def _kept_memory(tenant, store: str) -> str:
    status, body, _ = invoke("add_memory", build("add_memory", tenant, store))
    assert status == 201, body
    return body["id"]


def _a_year_from_now() -> str:
    return (datetime.now(UTC) + timedelta(days=300)).isoformat()


SAMPLE_RUN = "con_3e1a0123456789abcdef"


def _consolidation(tenant, store: str, mode: str) -> str:
    """A run of an actor without memories (no model call) in ``mode``, done: its id."""
    put = build("put_store", tenant, store, body={"consolidation_mode": mode})
    put["requestContext"]["http"]["method"] = "PUT"
    status, body, _ = invoke("put_store", put)
    assert status in (200, 201), body
    actor = unique("nobody")
    event = build("consolidate_actor", tenant, store)
    status, body, _ = invoke("consolidate_actor", _with_path(event, "user-1", actor))
    assert status == 202, body
    target = {"kind": "consolidation", "instance_id": tenant.instance_id, "store": store}
    done = API.background.load()({**target, "actor_id": actor}, LambdaContext("background"))
    assert done["consolidation_id"] == body["consolidation_id"], done
    return str(body["consolidation_id"])


def _undo_event(route: str, tenant, store: str) -> dict | None:
    """The event of a route of consolidation or undo, with the run or the replaced memory it
    needs made first; None for another route."""
    if route in ("apply_consolidation", "discard_consolidation", "revert_consolidation"):
        mode = "apply" if route == "revert_consolidation" else "review"
        run = _consolidation(tenant, store, mode)
        return _with_path(build(route, tenant, store), SAMPLE_RUN, run)
    if route == "restore_memory":
        old = _kept_memory(tenant, store)
        given = {**json.loads(build("add_memory", tenant)["body"]), "supersedes": old}
        status, body, _ = invoke("add_memory", build("add_memory", tenant, store, body=given))
        assert status == 201, body
        return _with_path(build(route, tenant, store), "mem_0123456789abcdef0123", old)
    return None


def _event_of(route: str, tenant, store: str) -> dict:
    """The sample event of ``route`` on ``store``, with what it needs made first."""
    undo = _undo_event(route, tenant, store)
    if undo is not None:
        return undo
    if route in ("pop_message", "delete_session", "extract_session"):
        assert invoke("add_events", build("add_events", tenant, store))[0] == 200
    if route == "put_store":
        return build(route, tenant, unique("another"))
    if route in ("update_memory", "delete_memory"):
        memory_id = _kept_memory(tenant, store)
        return _with_path(build(route, tenant, store), "mem_0123456789abcdef0123", memory_id)
    if route == "forget_actor":
        _kept_memory(tenant, store)
    if route == "delete_keyed_memory":
        assert invoke("put_keyed_memory", build("put_keyed_memory", tenant, store))[0] == 200
    if route == "delete_key":
        status, body, _ = invoke("create_key", _event_of("create_key", tenant, store))
        assert status == 201, body
        event = _with_path(build(route, tenant, store), "key_0123456789ab", body["key_id"])
        # made with a key the organization has (a revocation checks the caller's key is still
        # there: docs/keys.md)
        event["requestContext"]["authorizer"]["lambda"]["key_id"] = tenant.key_id
        return event
    given = json.loads(build(route, tenant).get("body") or "null")
    if route == "create_key":
        given["stores"] = [{"instance_id": tenant.instance_id, "store": store}]
    if route == "import_memories":
        for memory in given["memories"]:
            unit = np.zeros(1536, dtype="<f4")  # the store's dimensions
            unit[0] = 1.0
            memory["vector"] = base64.b64encode(unit.tobytes()).decode()
            memory["expires_at"] = _a_year_from_now()
    if route == "import_session":
        given["expires_at"] = _a_year_from_now()
    return (
        build(route, tenant, store, body=given)
        if given is not None
        else build(route, tenant, store)
    )


@pytest.mark.parametrize("route", sorted(EFFECTS))
def test_a_writing_route_tells_and_counts_what_its_row_says(hooked, route):
    tenant, store, effects = hooked
    events, counters, _ = EFFECTS[route]
    told, counted = effects(route, _event_of(route, tenant, store))
    assert (told, counted) == (set(events), set(counters))
