"""The outbox of webhook deliveries, in the control database: what a write queues for its store's
endpoints, what the delivery side takes when it is due, and each store's last deliveries.

A delivery is one JSON record (``ControlKeys.webhook``), its next attempt in its
organization's queue (``ControlKeys.webhooks_due_of``, with the organizations that have
something queued in ``ControlKeys.webhooks_due_orgs``) and its id in its store's log
(``ControlKeys.webhook_log``, the last ``LOG_SIZE``). Queueing is one script per delivery, sent
in one pipeline with the others of the same write: the write's caller waits for that round trip
only, never for a receiver.

Fair: ``claim`` serves the organizations in turn, one delivery each, and takes no more of an
organization than the sender lets it run at once, so one organization's backlog or hanging
receivers leave the others' deliveries claimed as soon as a thread is free
(``webhooks.delivery``).

At least once: ``claim`` leases what is due (scores it ``LEASE_MS`` ahead) rather than removing
it, so a delivery whose sender dies mid-attempt is tried again when the lease runs out, with
the same ``webhook-id``; a receiver deduplicates by that id (Standard Webhooks, "Idempotency").
After a failed attempt the next is ``RETRY_DELAYS`` later, as long as it falls within
``RETRY_WINDOW_MS`` of the event (the last one at the end of the window); then it has failed.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
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
ORGS_PER_SLOT = 4
"""A claim of ``most`` deliveries looks at the ``most * ORGS_PER_SLOT`` organizations due
longest (those at their cap are skipped; the others come in the next claims)."""
ADOPT_EVERY_SECONDS = 60.0

REINDEX = """
-- reindex(queue, index, org): the organization's place in the index is the earliest next
-- attempt in its queue; an empty queue leaves the index.
local function reindex(queue, index, org)
  local first = redis.call('ZRANGE', queue, 0, 0, 'WITHSCORES')
  if first[2] then
    redis.call('ZADD', index, first[2], org)
  else
    redis.call('ZREM', index, org)
  end
end
"""

ENQUEUE = (
    WRITES
    + REINDEX
    + """
-- KEYS: record, the organization's queue, store log, index of organizations. ARGV: id, record
-- JSON, ttl (s), now (ms), log size, record key prefix, organization. Queues one delivery; the
-- log keeps its last entries, and a record that falls out of it goes too unless it is still to
-- be tried.
redis.call('SET', KEYS[1], ARGV[2], 'EX', tonumber(ARGV[3]))
redis.call('ZADD', KEYS[2], tonumber(ARGV[4]), ARGV[1])
reindex(KEYS[2], KEYS[4], ARGV[7])
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
    + REINDEX
    + """
-- KEYS: index of organizations. ARGV: now (ms), lease (ms), most, record key prefix, queue key
-- prefix, most organizations looked at, room of an organization not named after, then pairs of
-- organization and its room (attempts it may still start). Leases what is due, one delivery of
-- each organization with room in turn (those due longest first), and returns the records; an
-- id whose record is gone leaves its queue. The queues' keys are made here from the index:
-- every one is in the {control} slot, like the records (whose keys the script made before).
local now, lease, most = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local room = {}
for i = 8, #ARGV, 2 do room[ARGV[i]] = tonumber(ARGV[i + 1]) end
local orgs = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[6]))
local open = {}
for _, org in ipairs(orgs) do
  local left = room[org] or tonumber(ARGV[7])
  if left > 0 then open[#open + 1] = {org, left} end
end
local found = {}
while #found < most and #open > 0 do
  local still = {}
  for _, entry in ipairs(open) do
    if #found >= most then break end
    local queue = ARGV[5] .. entry[1]
    local ids = redis.call('ZRANGEBYSCORE', queue, '-inf', now, 'LIMIT', 0, 1)
    if ids[1] then
      local record = redis.call('GET', ARGV[4] .. ids[1])
      if record then
        redis.call('ZADD', queue, now + lease, ids[1])
        found[#found + 1] = record
        entry[2] = entry[2] - 1
      else
        redis.call('ZREM', queue, ids[1])
      end
      if entry[2] > 0 then still[#still + 1] = entry end
    end
  end
  open = still
end
for _, org in ipairs(orgs) do reindex(ARGV[5] .. org, KEYS[1], org) end
return found
"""
)

RESCHEDULE = (
    WRITES
    + REINDEX
    + """
-- KEYS: the organization's queue, index of organizations. ARGV: id, when (ms), organization.
-- A claimed delivery given back unattempted is due again then (only while it is queued).
redis.call('ZADD', KEYS[1], 'XX', tonumber(ARGV[2]), ARGV[1])
reindex(KEYS[1], KEYS[2], ARGV[3])
return 1
"""
)

SETTLE = (
    WRITES
    + REINDEX
    + """
-- KEYS: record, the organization's queue, index of organizations. ARGV: id, record JSON, ttl
-- (s), next attempt (ms, or empty when settled for good), organization.
redis.call('SET', KEYS[1], ARGV[2], 'EX', tonumber(ARGV[3]))
if ARGV[4] ~= '' then
  redis.call('ZADD', KEYS[2], tonumber(ARGV[4]), ARGV[1])
else
  redis.call('ZREM', KEYS[2], ARGV[1])
end
reindex(KEYS[2], KEYS[3], ARGV[5])
return 1
"""
)

ADOPT = (
    WRITES
    + REINDEX
    + """
-- KEYS: the due set of before per-organization queues, the organization's queue, index of
-- organizations. ARGV: id, organization. Moves one delivery to its organization's queue at
-- the same due time (when the old set still holds it).
local due = redis.call('ZSCORE', KEYS[1], ARGV[1])
if due then
  redis.call('ZADD', KEYS[2], due, ARGV[1])
  redis.call('ZREM', KEYS[1], ARGV[1])
  reindex(KEYS[2], KEYS[3], ARGV[2])
end
return 1
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
        self._adopted_at: float | None = None

    def enqueue(self, deliveries: list[Delivery]) -> None:
        """Queue ``deliveries`` (pending, due now) in one round trip, each in its
        organization's queue."""
        if not deliveries:
            return
        now_ms = to_ms(self._clock.now())
        calls: list[tuple[list[str], list[str | int]]] = [
            (
                [
                    ControlKeys.webhook(delivery.id),
                    ControlKeys.webhooks_due_of(delivery.org_id),
                    ControlKeys.webhook_log(delivery.org_id, delivery.instance_id, delivery.store),
                    ControlKeys.webhooks_due_orgs,
                ],
                [
                    delivery.id,
                    delivery.model_dump_json(),
                    PENDING_TTL_SECONDS,
                    now_ms,
                    LOG_SIZE,
                    ControlKeys.webhook(""),
                    delivery.org_id,
                ],
            )
            for delivery in deliveries
        ]
        with database_errors():
            scripts_in_pipeline(self._redis, load_script(self._redis, ENQUEUE), calls)

    def claim(
        self, most: int, room: int = MAX_BATCH, busy: Mapping[str, int] | None = None
    ) -> list[Delivery]:
        """Lease up to ``most`` deliveries that are due now: one of each organization in turn
        (the organization due longest first, and its delivery due longest first), each
        organization at most ``room`` of them, or ``busy[org]`` for an organization named
        there (what it may still start: the sender's cap less its attempts under way). So an
        organization with a backlog, or with receivers that hang, never keeps another's
        deliveries waiting for a claim."""
        self._adopt_old_due_set()
        now_ms = to_ms(self._clock.now())
        most = min(most, MAX_BATCH)
        pairs: list[str | int] = []
        for org, left in (busy or {}).items():
            pairs += [org, max(left, 0)]
        with database_errors():
            found: Any = load_script(self._redis, CLAIM)(
                keys=[ControlKeys.webhooks_due_orgs],
                args=[
                    now_ms,
                    LEASE_MS,
                    most,
                    ControlKeys.webhook(""),
                    ControlKeys.webhooks_due_of(""),
                    most * ORGS_PER_SLOT,
                    room,
                    *pairs,
                ],
            )
        return [Delivery.model_validate_json(record) for record in found]

    def release(self, delivery: Delivery, delay_ms: int) -> None:
        """Give back a claimed ``delivery`` unattempted, due again in ``delay_ms`` (its
        endpoint is busy with other attempts)."""
        due = to_ms(self._clock.now()) + delay_ms
        with database_errors():
            load_script(self._redis, RESCHEDULE)(
                keys=[ControlKeys.webhooks_due_of(delivery.org_id), ControlKeys.webhooks_due_orgs],
                args=[delivery.id, due, delivery.org_id],
            )

    def settle(self, delivery: Delivery) -> None:
        """Keep ``delivery`` as its attempt left it: due again at ``next_ms`` while pending,
        else out of its queue, its body and sealed secret dropped."""
        pending = delivery.state == "pending" and delivery.next_ms is not None
        if pending:
            kept, ttl, following = delivery, PENDING_TTL_SECONDS, str(delivery.next_ms)
        else:
            kept = delivery.model_copy(update={"body": None, "secret": None})
            ttl, following = SETTLED_TTL_SECONDS, ""
        with database_errors():
            load_script(self._redis, SETTLE)(
                keys=[
                    ControlKeys.webhook(delivery.id),
                    ControlKeys.webhooks_due_of(delivery.org_id),
                    ControlKeys.webhooks_due_orgs,
                ],
                args=[delivery.id, kept.model_dump_json(), ttl, following, delivery.org_id],
            )

    def _adopt_old_due_set(self) -> None:
        """Move what the one due set of before per-organization queues still holds
        (``ControlKeys.webhooks_due``) to its organizations' queues, at the same due times;
        looked at once a minute per outbox (a sender of the previous version may still settle
        into it for a minute after an upgrade)."""
        now = time.monotonic()
        if self._adopted_at is not None and now - self._adopted_at < ADOPT_EVERY_SECONDS:
            return
        with database_errors():
            while found := self._redis.zrange(ControlKeys.webhooks_due, 0, MAX_BATCH - 1):
                ids = [str(i) for i in found]
                records = self._redis.mget([ControlKeys.webhook(i) for i in ids])
                gone = [i for i, record in zip(ids, records, strict=True) if record is None]
                if gone:
                    self._redis.zrem(ControlKeys.webhooks_due, *gone)
                calls: list[tuple[list[str], list[str | int]]] = []
                for delivery_id, record in zip(ids, records, strict=True):
                    if record is not None:
                        org = Delivery.model_validate_json(record).org_id
                        keys = [
                            ControlKeys.webhooks_due,
                            ControlKeys.webhooks_due_of(org),
                            ControlKeys.webhooks_due_orgs,
                        ]
                        calls.append((keys, [delivery_id, org]))
                if calls:
                    scripts_in_pipeline(self._redis, load_script(self._redis, ADOPT), calls)
        self._adopted_at = now

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
            orgs = self._redis.zrange(ControlKeys.webhooks_due_orgs, 0, -1)
            with self._redis.pipeline(transaction=False) as pipe:
                pipe.zcard(ControlKeys.webhooks_due)
                for org in orgs:
                    pipe.zcard(ControlKeys.webhooks_due_of(str(org)))
                return sum(int(n) for n in pipe.execute())


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
