"""What a store holds now, for its usage: live sessions, their messages, live memories, and
the bytes of every key of the store (``Holding``); and the usage answer that puts it beside the
days the control database counted (``UsageReport``).

Reads only, in batches of pipelined commands: ``ZCARD`` of each live session's messages, and
``MEMORY USAGE`` (Redis's estimate of a key's bytes, its overhead included) of each key that
``SCAN MATCH`` finds under the store's prefix. The scan walks the database's whole keyspace
(every store's keys), so this costs about a millisecond per few thousand keys of the
database: for the usage route, never for the request path.

For many stores of one database at once (the organization's usage, ``instance_holding``) the
database is scanned once, each key's bytes going to the store its name begins with, and every
store's counts are asked in the same pipelines: a read of the whole keyspace and a round trip
per ``BATCH`` commands, however many stores (issue 32: 110 stores read one after another, a
scan each, took 30.4 s on a database of 300,000 keys).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from typing import TypeVar

import redis
from pydantic import Field

from agent_memory.clock import Clock, to_ms
from agent_memory.control.usage import UsageDay
from agent_memory.database.client import database_errors
from agent_memory.database.keys import PREFIX
from agent_memory.database.partitions import counted, queue_count
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


def instance_holding(client: redis.Redis, configs: Sequence[StoreConfig], clock: Clock) -> Holding:
    """What the stores of ``configs`` (all of one database, on ``client``) hold now, summed:
    ``store_holding`` of each, read together (module docstring). Errors:
    ``DatabaseUnavailable``."""
    now_ms = to_ms(clock.now())
    stores = [config.keys() for config in configs]
    sessions = messages = memories = 0
    with database_errors():
        for chunk in _chunks(iter(stores), BATCH // 10):
            with client.pipeline(transaction=False) as pipe:
                for keys in chunk:
                    pipe.zrangebyscore(keys.session_expiry, f"({now_ms}", "+inf")
                    queue_count(pipe, keys, now_ms)
                replies = iter(pipe.execute())
            live: list[str] = []
            for keys in chunk:
                ids = next(replies)
                sessions += len(ids)
                live += [keys.session(str(i)).messages for i in ids]
                memories += counted(list(islice(replies, 2 * len(keys.memory_partitions()))))
            for batch in _chunks(iter(live), BATCH):
                with client.pipeline(transaction=False) as pipe:
                    for key in batch:
                        pipe.zcard(key)
                    messages += sum(int(n or 0) for n in pipe.execute())
        byte_count = _bytes_of(client, {keys.all_pattern.removesuffix("*") for keys in stores})
    return Holding(sessions=sessions, messages=messages, memories=memories, bytes=byte_count)


def _bytes_of(client: redis.Redis, bases: set[str]) -> int:
    """``MEMORY USAGE`` summed over the keys that begin with one of ``bases`` (each a store
    incarnation's ``kividb:mem:<store>:<inc>:``), in one scan of the database's store keys. A
    key's base is its name up to the second ``:`` after the prefix: store names and
    incarnations hold no ``:`` (``database.keys``)."""
    total = 0
    found = client.scan_iter(match=PREFIX + "*", count=BATCH)
    for chunk in _chunks(iter(found), BATCH):
        mine = [key for key in map(str, chunk) if _base(key) in bases]
        if not mine:
            continue
        with client.pipeline(transaction=False) as pipe:
            for key in mine:
                pipe.memory_usage(key)
            total += sum(int(n or 0) for n in pipe.execute())
    return total


def _base(key: str) -> str:
    """``kividb:mem:<store>:<inc>:`` of a store key (``""`` for the stores' hash)."""
    store, colon, rest = key[len(PREFIX) :].partition(":")
    incarnation, colon2, _ = rest.partition(":")
    return f"{PREFIX}{store}:{incarnation}:" if colon and colon2 else ""
