"""The deliveries an event of a store makes: one per endpoint that asked for it, all sending the
event's one body (Standard Webhooks: ``{"type", "timestamp", "data"}``) on every attempt.

``data`` holds the store's own ids and what the event is about (a memory as clients see it, a
session id, an extraction's counts), never a provider key, the signing secret or anything of
another store.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from agent_memory.clock import to_ms
from agent_memory.webhooks.models import Delivery, WebhookEndpoint
from agent_memory.webhooks.outbox import new_delivery_id


class HookedStore(Protocol):
    """What an event needs of a store (``stores.models.StoreConfig`` has it)."""

    @property
    def name(self) -> str: ...
    @property
    def incarnation(self) -> str: ...
    @property
    def webhooks(self) -> list[WebhookEndpoint]: ...
    @property
    def webhook_secret_ciphertext(self) -> str | None: ...


class KeptMemory(Protocol):
    """What an event needs of a memory kept (``memories.models.MemoryView`` has it)."""

    @property
    def id(self) -> str: ...
    @property
    def actor_id(self) -> str | None: ...
    def model_dump(self, *, mode: str, exclude_none: bool) -> dict[str, Any]: ...


def event_body(event: str, moment: datetime, data: dict[str, Any]) -> str:
    """The JSON body of ``event`` at ``moment`` (compact, UTF-8 as it is)."""
    payload = {"type": event, "timestamp": moment.isoformat(), "data": data}
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False, default=str)


@dataclass(frozen=True)
class Event:
    """One event of a store: its id, its body, and a delivery per endpoint that asked for it.
    ``in_store``: the body goes in the store's keyspace (``StoreKeys.webhook_body``), for
    every event but ``store.deleted``, whose body rides in its deliveries."""

    id: str
    body: str
    deliveries: list[Delivery]
    in_store: bool


INLINE_EVENTS = frozenset({"store.deleted"})
"""Events whose body is kept with their deliveries: the store's keyspace is gone."""


def new_event_id() -> str:
    """``evt_`` and 24 random base-32 characters."""
    return "evt_" + new_delivery_id().removeprefix("msg_")


def event_for(
    config: HookedStore,
    org_id: str,
    instance_id: str,
    event: str,
    data: dict[str, Any],
    moment: datetime,
) -> Event | None:
    """``event`` with ``data`` for each of the store's endpoints that asked for it, or None when
    none did (or the store has no signing secret yet); ``data`` gets the store's
    ``instance_id`` and ``store`` first."""
    endpoints = [e for e in config.webhooks if event in e.events]
    if not endpoints or config.webhook_secret_ciphertext is None:
        return None
    body = event_body(event, moment, {"instance_id": instance_id, "store": config.name, **data})
    event_id = new_event_id()
    inline = event in INLINE_EVENTS
    deliveries = [
        Delivery(
            id=new_delivery_id(),
            event_id=event_id,
            org_id=org_id,
            instance_id=instance_id,
            store=config.name,
            incarnation=config.incarnation,
            event=event,
            url=endpoint.url,
            body=body if inline else None,
            secret=config.webhook_secret_ciphertext,
            created_ms=to_ms(moment),
        )
        for endpoint in endpoints
    ]
    return Event(event_id, body, deliveries, in_store=not inline)


def updated_event(memory: KeptMemory) -> dict[str, Any]:
    """The data of ``memory.updated``: the memory as clients see it after the change, without
    its versions and chain (``GET`` of the memory has them), as ``memory.created`` shows one."""
    shown = memory.model_dump(mode="json", exclude_none=True)
    for history in ("versions", "versions_omitted", "chain", "chain_omitted"):
        shown.pop(history, None)
    return {"memory": shown}


def kept_events(memory: KeptMemory, superseded: str | None) -> list[tuple[str, dict[str, Any]]]:
    """The events of a memory kept (not a duplicate): ``memory.created`` with the memory as
    clients see it, and ``memory.superseded`` naming the one it replaced, if any."""
    events: list[tuple[str, dict[str, Any]]] = [
        ("memory.created", {"memory": memory.model_dump(mode="json", exclude_none=True)})
    ]
    if superseded is not None:
        events.append(
            (
                "memory.superseded",
                {"memory_id": superseded, "superseded_by": memory.id, "actor_id": memory.actor_id},
            )
        )
    return events
