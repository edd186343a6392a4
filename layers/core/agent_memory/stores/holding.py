"""What a store holds now, for its usage (``control.usage.Holding``): live sessions, their
messages, live memories, and the bytes of every key of the store.

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

from agent_memory.clock import Clock, to_ms
from agent_memory.control.usage import Holding
from agent_memory.database.client import database_errors
from agent_memory.stores.models import StoreConfig

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
