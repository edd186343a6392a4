"""What a store holds now, for its usage: live sessions, their messages, live memories, and
the bytes of every key of the store (``Holding``); and the usage answer that puts it beside the
days the control database counted (``UsageReport``).

Reads only, in batches of pipelined commands: ``ZCARD`` of each live session's messages, and
``MEMORY USAGE`` (Redis's estimate of a key's bytes, its overhead included) of each key that
``SCAN MATCH`` finds under the store's prefix. The scan walks the database's whole keyspace
(every store's keys), so this costs about a millisecond per few thousand keys of the
database: for the usage route, never for the request path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import islice
from typing import TypeVar

import redis
from pydantic import Field

from agent_memory.clock import Clock, to_ms
from agent_memory.control.usage import UsageDay
from agent_memory.database.client import database_errors
from agent_memory.models import View
from agent_memory.stores.models import StoreConfig, UnreachableInstance


class Holding(View):
    """What a store (or an organization's stores) holds now: live sessions, their messages,
    live memories, and the bytes of every key (Redis ``MEMORY USAGE``, an estimate that
    includes each key's overhead)."""

    sessions: int
    messages: int
    memories: int
    bytes: int


class UsageReport(View):
    """``GET .../usage``: each day of the range, oldest first (days with nothing used
    included, as zeros), and what is held now; for the organization, the instances that could
    not be read for ``now`` (empty for a store)."""

    days: list[UsageDay]
    now: Holding
    unreachable: list[UnreachableInstance] = Field(default_factory=list)


BATCH = 1000
T = TypeVar("T")


def _chunks(items: Iterator[T], size: int) -> Iterator[list[T]]:
    while chunk := list(islice(items, size)):
        yield chunk


def store_holding(
    client: redis.Redis, config: StoreConfig, clock: Clock, memories: Callable[[], int]
) -> Holding:
    """What ``config``'s store holds now; ``memories`` counts its live memories
    (``Memories.count``). Errors: ``DatabaseUnavailable``."""
    keys = config.keys()
    now_ms = to_ms(clock.now())
    messages = 0
    byte_count = 0
    with database_errors():
        live = client.zrangebyscore(keys.session_expiry, f"({now_ms}", "+inf")
        for chunk in _chunks(iter(live), BATCH):
            with client.pipeline(transaction=False) as pipe:
                for session_id in chunk:
                    pipe.zcard(keys.session(str(session_id)).messages)
                messages += sum(int(n or 0) for n in pipe.execute())
        found = client.scan_iter(match=keys.all_pattern, count=BATCH)
        for chunk in _chunks(iter(found), BATCH):
            with client.pipeline(transaction=False) as pipe:
                for key in chunk:
                    pipe.memory_usage(str(key))
                byte_count += sum(int(n or 0) for n in pipe.execute())
    return Holding(sessions=len(live), messages=messages, memories=memories(), bytes=byte_count)
