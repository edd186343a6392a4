"""The outbox of webhook deliveries, in the control database: what a write queues for its store's
endpoints, what the delivery side takes when it is due, and each store's last deliveries.

A delivery is one JSON record (``ControlKeys.webhook``), its next attempt in one due set
(``ControlKeys.webhooks_due``) and its id in its store's log (``ControlKeys.webhook_log``, the
last ``LOG_SIZE``). Queueing is one script per delivery, sent in one pipeline with the others of
the same write: the write's caller waits for that round trip only, never for a receiver.

At least once: ``claim`` leases what is due (scores it ``LEASE_MS`` ahead) rather than removing
it, so a delivery whose sender dies mid-attempt is tried again when the lease runs out, with
the same ``webhook-id``; a receiver deduplicates by that id (Standard Webhooks, "Idempotency").
After a failed attempt the next is ``RETRY_DELAYS`` later, as long as it falls within
``RETRY_WINDOW_MS`` of the event (the last one at the end of the window); then it has failed.
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

import redis

from agent_memory.clock import Clock, from_ms, to_ms
from agent_memory.database.client import database_errors
from agent_memory.database.keys import ControlKeys
from agent_memory.database.scripts import WRITES, load_script, scripts_in_pipeline
from agent_memory.webhooks.models import Delivery, DeliveryList, DeliveryView

LOG_SIZE = 100
"""Deliveries a store's log keeps (``GET .../webhooks/deliveries``)."""
LEASE_MS = 60_000
"""How long a claimed delivery is the claimer's: well over one attempt (``delivery.TIMEOUT``)."""
RETRY_DELAYS = (5, 300, 1800, 7200, 18_000, 36_000, 36_000)
"""Seconds from a failed attempt to the next: the schedule of the Standard Webhooks
specification's reference service (Svix, "Retry schedule": 5 s, 5 min, 30 min, 2 h, 5 h,
10 h, 10 h), cut at ``RETRY_WINDOW_MS``."""
RETRY_WINDOW_MS = 24 * 3600 * 1000
"""How long after its event a delivery is still tried."""
PENDING_TTL_SECONDS = 2 * 86_400
"""A record of a delivery still to be tried outlives its retry window by a day."""
SETTLED_TTL_SECONDS = 30 * 86_400
"""A settled record is kept while its store's log names it, at most 30 days."""
MAX_BATCH = 100

ENQUEUE = (
    WRITES
    + """
-- KEYS: record, due set, store log. ARGV: id, record JSON, ttl (s), now (ms), log size, record
-- key prefix. Queues one delivery; the log keeps its last entries, and a record that falls out
-- of it goes too unless it is still to be tried.
redis.call('SET', KEYS[1], ARGV[2], 'EX', tonumber(ARGV[3]))
redis.call('ZADD', KEYS[2], tonumber(ARGV[4]), ARGV[1])
redis.call('LPUSH', KEYS[3], ARGV[1])
local size = tonumber(ARGV[5])
local dropped = redis.call('LRANGE', KEYS[3], size, -1)
redis.call('LTRIM', KEYS[3], 0, size - 1)
for _, id in ipairs(dropped) do
  if not redis.call('ZSCORE', KEYS[2], id) then redis.call('DEL', ARGV[6] .. id) end
end
return 1
"""
)

CLAIM = (
    WRITES
    + """
-- KEYS: due set. ARGV: now (ms), lease (ms), most, record key prefix. Leases what is due and
-- returns its records; an id whose record is gone leaves the set.
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local found = {}
for _, id in ipairs(ids) do
  local record = redis.call('GET', ARGV[4] .. id)
  if record then
    redis.call('ZADD', KEYS[1], tonumber(ARGV[1]) + tonumber(ARGV[2]), id)
    found[#found + 1] = record
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return found
"""
)


def new_delivery_id() -> str:
    """``msg_`` and 24 random base-32 characters (the specification's examples use ``msg_``)."""
    alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
    return "msg_" + "".join(secrets.choice(alphabet) for _ in range(24))


def next_attempt_ms(delivery: Delivery, now_ms: int) -> int | None:
    """When a delivery that has just failed its ``attempts``-th attempt is tried again, or None
    when it is not (its retry window has passed)."""
    end = delivery.created_ms + RETRY_WINDOW_MS
    if now_ms >= end:
        return None
    delay = RETRY_DELAYS[min(delivery.attempts, len(RETRY_DELAYS)) - 1] * 1000
    return min(now_ms + delay, end)


class Outbox:
    """The deliveries in the control database. Errors: ``DatabaseUnavailable``."""

    def __init__(self, client: redis.Redis, clock: Clock) -> None:
        self._redis = client
        self._clock = clock

    def enqueue(self, deliveries: list[Delivery]) -> None:
        """Queue ``deliveries`` (pending, due now) in one round trip."""
        if not deliveries:
            return
        now_ms = to_ms(self._clock.now())
        calls: list[tuple[list[str], list[str | int]]] = [
            (
                [
                    ControlKeys.webhook(delivery.id),
                    ControlKeys.webhooks_due,
                    ControlKeys.webhook_log(delivery.org_id, delivery.instance_id, delivery.store),
                ],
                [
                    delivery.id,
                    delivery.model_dump_json(),
                    PENDING_TTL_SECONDS,
                    now_ms,
                    LOG_SIZE,
                    ControlKeys.webhook(""),
                ],
            )
            for delivery in deliveries
        ]
        with database_errors():
            scripts_in_pipeline(self._redis, load_script(self._redis, ENQUEUE), calls)

    def claim(self, most: int) -> list[Delivery]:
        """Lease up to ``most`` deliveries that are due now, oldest due first."""
        now_ms = to_ms(self._clock.now())
        with database_errors():
            found: Any = load_script(self._redis, CLAIM)(
                keys=[ControlKeys.webhooks_due],
                args=[now_ms, LEASE_MS, min(most, MAX_BATCH), ControlKeys.webhook("")],
            )
        return [Delivery.model_validate_json(record) for record in found]

    def release(self, delivery: Delivery, delay_ms: int) -> None:
        """Give back a claimed ``delivery`` unattempted, due again in ``delay_ms`` (its
        endpoint's host is busy with other attempts)."""
        due = to_ms(self._clock.now()) + delay_ms
        with database_errors():
            self._redis.zadd(ControlKeys.webhooks_due, {delivery.id: due}, xx=True)

    def settle(self, delivery: Delivery) -> None:
        """Keep ``delivery`` as its attempt left it: due again at ``next_ms`` while pending,
        else out of the due set, its body and sealed secret dropped."""
        with database_errors(), self._redis.pipeline(transaction=True) as pipe:
            if delivery.state == "pending" and delivery.next_ms is not None:
                pipe.set(
                    ControlKeys.webhook(delivery.id),
                    delivery.model_dump_json(),
                    ex=PENDING_TTL_SECONDS,
                )
                pipe.zadd(ControlKeys.webhooks_due, {delivery.id: delivery.next_ms})
            else:
                settled = delivery.model_copy(update={"body": None, "secret": None})
                pipe.set(
                    ControlKeys.webhook(delivery.id),
                    settled.model_dump_json(),
                    ex=SETTLED_TTL_SECONDS,
                )
                pipe.zrem(ControlKeys.webhooks_due, delivery.id)
            pipe.execute()

    def log(self, org_id: str, instance_id: str, store: str) -> DeliveryList:
        """The store's last deliveries, newest first."""
        with database_errors():
            ids = self._redis.lrange(ControlKeys.webhook_log(org_id, instance_id, store), 0, -1)
            records = self._redis.mget([ControlKeys.webhook(str(i)) for i in ids]) if ids else []
        views = [_view(Delivery.model_validate_json(r)) for r in records if r is not None]
        return DeliveryList(deliveries=views)

    def due_count(self) -> int:
        """Deliveries still to be tried (leased ones included)."""
        with database_errors():
            return int(self._redis.zcard(ControlKeys.webhooks_due))


def _moment(ms: int | None) -> datetime | None:
    return from_ms(ms) if ms is not None else None


def _view(delivery: Delivery) -> DeliveryView:
    return DeliveryView(
        webhook_id=delivery.id,
        event=delivery.event,
        url=delivery.url,
        status=delivery.state,
        attempts=delivery.attempts,
        created_at=from_ms(delivery.created_ms),
        last_attempt_at=_moment(delivery.last_attempt_ms),
        next_attempt_at=_moment(delivery.next_ms) if delivery.state == "pending" else None,
        last_status_code=delivery.last_status,
        last_error=delivery.last_error,
    )
