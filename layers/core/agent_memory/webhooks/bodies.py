"""The bodies of a store's webhook events, kept in the store's own keyspace
(``StoreKeys.webhook_body``): what an event says of the store's data stays where the store
keeps its data, and goes with it when the store is deleted (its pending deliveries then fail:
there is nothing left to send). Each expires after the retry window and a day
(``outbox.PENDING_TTL_SECONDS``)."""

from __future__ import annotations

from collections.abc import Iterable

import redis

from agent_memory.database.client import database_errors
from agent_memory.database.keys import StoreKeys
from agent_memory.webhooks.models import Delivery
from agent_memory.webhooks.outbox import PENDING_TTL_SECONDS


def keep_bodies(client: redis.Redis, keys: StoreKeys, bodies: Iterable[tuple[str, str]]) -> None:
    """Write each ``(event_id, body)`` under ``keys.webhook_body`` in one pipelined round trip.
    Errors: ``DatabaseUnavailable``."""
    given = list(bodies)
    if not given:
        return
    with database_errors(), client.pipeline(transaction=False) as pipe:
        for event_id, body in given:
            pipe.set(keys.webhook_body(event_id), body, ex=PENDING_TTL_SECONDS)
        pipe.execute()


class EventGone(Exception):
    """A delivery with nothing to send any more: its store (with the event's body) is gone,
    or the store no longer has its endpoint for its event. The message says which."""


def read_body(client: redis.Redis, delivery: Delivery) -> str | None:
    """The body of ``delivery``'s event in its store's keyspace, or None when it is gone (the
    store deleted, or the body expired). Errors: ``DatabaseUnavailable``."""
    key = StoreKeys(delivery.store, delivery.incarnation).webhook_body(delivery.event_id)
    with database_errors():
        found = client.get(key)
    if found is None:
        return None
    return found.decode("utf-8") if isinstance(found, bytes) else str(found)
