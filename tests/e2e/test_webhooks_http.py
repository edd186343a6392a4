"""Signed webhooks over HTTP through the local stack (its delivery loop runs the template's
``DeliverWebhooksFunction`` every half second): a store names endpoints and events, a route's
write or a background run queues the events, and a loopback receiver gets them signed with the
secret ``POST .../webhooks/secret`` showed, verified with the ``standardwebhooks`` package; a
failed attempt is tried again with the same id; the deliveries are listed; bad endpoints are
refused naming the field; a key limited to actors or to reading gets 403."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from standardwebhooks import Webhook

from kividb_memory import MemoryClient, PermissionDeniedError, StoreClient
from tests.support.common import unique
from tests.support.stack import Stack, model_store
from tools.webhook_receiver import WebhookReceiver

ALL_EVENTS = [
    "extraction.completed",
    "extraction.failed",
    "memory.created",
    "memory.superseded",
    "memory.deleted",
    "session.deleted",
    "store.deleted",
]


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as server:
        yield server


def _events(receiver: WebhookReceiver, secret: str, count: int) -> list[dict]:
    """The first ``count`` distinct deliveries, each verified (signature and timestamp)."""
    seen: dict[str, dict] = {}
    end = time.monotonic() + 20
    while len(seen) < count and time.monotonic() < end:
        for got in receiver.delivered():
            seen.setdefault(
                got.headers["webhook-id"], Webhook(secret).verify(got.body, got.headers)
            )
        time.sleep(0.05)
    assert len(seen) >= count, f"{len(seen)} of {count} events delivered"
    return list(seen.values())


def test_route_writes_reach_the_endpoint_signed_and_the_deliveries_are_listed(
    memory: MemoryClient, receiver: WebhookReceiver
):
    name = unique("hooked")
    view = memory.put_store(
        "local", name, dimensions=3, webhooks=[{"url": receiver.url, "events": ALL_EVENTS}]
    )
    assert view.has_webhook_secret and view.webhooks[0].url == receiver.url
    assert "whsec_" not in view.model_dump_json()
    store = memory.store("local", name)
    secret = store.rotate_webhook_secret().secret
    assert secret.startswith("whsec_") and len(secret) == 6 + 44
    kept = store.add_memory("Ana likes green tea", actor_id="ana", vector=[1.0, 0.0, 0.0])
    newer = store.add_memory(
        "Ana likes black tea", actor_id="ana", vector=[0.0, 1.0, 0.0], supersedes=kept.id
    )
    store.add_events("s1", [{"role": "user", "content": "hello"}], actor_id="ana")
    store.delete_session("s1")
    store.delete_memory(newer.id)
    events = _events(receiver, secret, 5)
    by_type = {e["type"]: e["data"] for e in events}
    assert sorted(by_type) == [
        "memory.created",
        "memory.deleted",
        "memory.superseded",
        "session.deleted",
    ]
    created = [e["data"]["memory"]["text"] for e in events if e["type"] == "memory.created"]
    assert sorted(created) == ["Ana likes black tea", "Ana likes green tea"]
    assert by_type["memory.superseded"] == {
        "instance_id": "local",
        "store": name,
        "memory_id": kept.id,
        "superseded_by": newer.id,
        "actor_id": "ana",
    }
    assert by_type["session.deleted"]["session_id"] == "s1"
    assert by_type["memory.deleted"]["memory_id"] == newer.id
    listed = store.webhook_deliveries().deliveries
    assert len(listed) == 5 and {d.status for d in listed} == {"delivered"}
    assert listed[0].event == "memory.deleted"  # newest first
    assert all(d.attempts == 1 and d.last_status_code == 204 for d in listed)
    memory.delete_store("local", name)
    (gone,) = [e for e in _events(receiver, secret, 6) if e["type"] == "store.deleted"]
    assert gone["data"]["store"] == name


def test_a_failed_attempt_is_sent_again_with_the_same_id(memory: MemoryClient):
    with WebhookReceiver(["fail"]) as receiver:
        name = unique("retried")
        memory.put_store(
            "local",
            name,
            dimensions=3,
            webhooks=[{"url": receiver.url, "events": ["memory.created"]}],
        )
        store = memory.store("local", name)
        secret = store.rotate_webhook_secret().secret
        store.add_memory("Bo rides a bike", vector=[1.0, 0.0, 0.0])
        (event,) = _events(receiver, secret, 1)  # the retry comes 5 s after the failure
        assert event["data"]["memory"]["text"] == "Bo rides a bike"
        first, second = receiver.received
        assert first.status == 500 and second.status == 204
        assert first.headers["webhook-id"] == second.headers["webhook-id"]
        (listed,) = store.webhook_deliveries().deliveries
        assert (listed.status, listed.attempts, listed.last_status_code) == ("delivered", 2, 204)
        memory.delete_store("local", name)


def test_an_endpoint_removed_gets_nothing_more_of_what_was_queued_for_it(memory: MemoryClient):
    with WebhookReceiver(["fail"] * 5) as receiver:
        name = unique("removed")
        hook = [{"url": receiver.url, "events": ["memory.created"]}]
        memory.put_store("local", name, dimensions=3, webhooks=hook)
        store = memory.store("local", name)
        store.add_memory("Ivy's door code is 4711", vector=[1.0, 0.0, 0.0])
        deadline = time.monotonic() + 10
        while not receiver.received and time.monotonic() < deadline:
            time.sleep(0.05)
        memory.put_store("local", name, webhooks=None)  # before the retry, 5 s later
        deadline = time.monotonic() + 15
        while (listed := store.webhook_deliveries().deliveries)[0].status == "pending":
            assert time.monotonic() < deadline, listed
            time.sleep(0.2)
        (gone,) = listed
        assert gone.status == "failed" and gone.attempts == 1
        assert gone.last_error == "not sent: the store no longer sends this event to this endpoint"
        assert len(receiver.received) == 1
        memory.delete_store("local", name)


def test_a_background_run_tells_what_it_extracted(memory: MemoryClient, provider, receiver):
    path = model_store(memory, provider, webhooks=[{"url": receiver.url, "events": ALL_EVENTS}])
    store = memory.store("local", path.rsplit("/", 1)[1])
    secret = store.rotate_webhook_secret().secret
    store.add_events(
        "talk", [{"role": "user", "content": "I moved to Lisbon last year."}], actor_id="cy"
    )
    store.extract("talk")
    events = _events(receiver, secret, 2)
    done = [e["data"] for e in events if e["type"] == "extraction.completed"]
    created = [e["data"] for e in events if e["type"] == "memory.created"]
    assert done and done[0]["session_id"] == "talk" and done[0]["memories_kept"] == 1
    assert "Lisbon" in created[0]["memory"]["text"] and created[0]["session_id"] == "talk"
    memory.delete_store("local", store.name)


def test_profile_changes_are_told_with_who_made_them_and_drops_are_counted(
    memory: MemoryClient, provider, receiver
):
    """Extraction fills a field (``profile.updated`` by extraction) and gives a date that is
    not one (left out, counted in ``extraction.completed``); a caller's change is told too."""
    path = model_store(
        memory,
        provider,
        webhooks=[{"url": receiver.url, "events": ["extraction.completed", "profile.updated"]}],
        profile_fields=[
            {"name": "city", "description": "Where the user lives"},
            {"name": "birthday", "description": "The user's birthday", "type": "date"},
        ],
    )
    store = memory.store("local", path.rsplit("/", 1)[1])
    secret = store.rotate_webhook_secret().secret
    store.add_events(
        "talk",
        [{"role": "user", "content": "I live in Lisbon. My birthday is 2023-02-30."}],
        actor_id="cy",
    )
    store.extract("talk")
    events = _events(receiver, secret, 2)
    (done,) = [e["data"] for e in events if e["type"] == "extraction.completed"]
    (told,) = [e["data"] for e in events if e["type"] == "profile.updated"]
    assert (done["profile_fields_updated"], done["profile_values_dropped"]) == (1, 1)
    assert (told["actor_id"], told["fields"], told["by"], told["session_id"]) == (
        "cy",
        ["city"],
        "extraction",
        "talk",
    )
    assert {n: e.value for n, e in store.get_profile("cy").fields.items()} == {"city": "Lisbon"}
    store.update_profile("cy", {"birthday": "1990-04-01"})
    later = _events(receiver, secret, 3)
    caller = [
        e["data"] for e in later if e["type"] == "profile.updated" and e["data"]["by"] == "caller"
    ]
    assert caller == [
        {
            "instance_id": "local",
            "store": store.name,
            "actor_id": "cy",
            "fields": ["birthday"],
            "by": "caller",
        }
    ]
    memory.delete_store("local", store.name)


def test_bad_endpoints_are_refused_naming_the_field_and_nothing_changes(
    api: httpx.Client, memory: MemoryClient, memory_store: StoreClient
):
    path = f"/instances/local/agent-memory/{memory_store.name}"
    good = {"url": "https://hooks.example.com/in", "events": ["memory.created"]}
    for webhooks, field in [
        ([good] * 6, "webhooks"),
        ([{**good, "events": ["memory.renamed"]}], "webhooks.0.events.0"),
        ([{**good, "events": []}], "webhooks.0.events"),
        ([{**good, "events": ["memory.created", "memory.created"]}], "webhooks.0.events"),
        ([{**good, "url": "https://user:pw@hooks.example.com/"}], "webhooks.0.url"),
        ([{**good, "url": "https://hooks.example.com/#frag"}], "webhooks.0.url"),
        ([{**good, "url": "ftp://hooks.example.com/"}], "webhooks.0.url"),
        ([{**good, "secret": "x"}], "webhooks.0.secret"),
        ([good, {**good, "events": ["memory.deleted"]}], "webhooks"),
        ("https://hooks.example.com/in", "webhooks"),
    ]:
        answer = api.put(path, json={"webhooks": webhooks})
        assert answer.status_code == 422, (webhooks, answer.text)
        assert answer.json()["details"][0]["field"] == field, (webhooks, answer.text)
    view = memory.get_store("local", memory_store.name)
    assert view.webhooks == [] and not view.has_webhook_secret


def test_keys_limited_to_actors_or_reading_cannot_manage_or_read_webhooks(
    stack: Stack, memory: MemoryClient, memory_store: StoreClient
):
    where = ("local", memory_store.name)
    actor_key = memory.create_key("write", stores=[where], actors=["ana"]).api_key
    reader_key = memory.create_key("read", stores=[where]).api_key
    with stack.memory(actor_key) as as_actor, stack.memory(reader_key) as as_reader:
        for client in (as_actor, as_reader):
            with pytest.raises(PermissionDeniedError):
                client.store(*where).rotate_webhook_secret()
        with pytest.raises(PermissionDeniedError):
            as_actor.store(*where).webhook_deliveries()
        assert as_reader.store(*where).webhook_deliveries().deliveries == []


def test_a_receivers_token_in_the_url_is_shown_only_to_keys_that_manage_the_store(
    stack: Stack, memory: MemoryClient, memory_store: StoreClient
):
    where = ("local", memory_store.name)
    url = "https://hooks.example.com/in?token=receiver-secret"
    memory.put_store(*where, webhooks=[{"url": url, "events": ["session.deleted"]}])
    memory_store.add_events("s", [{"role": "user", "content": "x"}])
    memory_store.delete_session("s")  # a delivery to list (it fails: no such host here)
    keys = {
        "store": memory.create_key("write", stores=[where]).api_key,
        "reader": memory.create_key("read").api_key,
        "actor": memory.create_key("read", stores=[where], actors=["ann"]).api_key,
        "manager": memory.create_key("write", instances=["local"]).api_key,
    }
    for name, key in keys.items():
        with stack.memory(key) as client:
            shown = {
                client.get_store(*where).webhooks[0].url,
                *(s.webhooks[0].url for s in client.list_stores().stores if s.name == where[1]),
                *(
                    s.webhooks[0].url
                    for s in client.list_stores("local").stores
                    if s.name == where[1]
                ),
            }
            if name != "actor":
                shown |= {d.url for d in client.store(*where).webhook_deliveries().deliveries}
        expected = url if name == "manager" else "https://hooks.example.com/in?***"
        assert shown == {expected}, name
