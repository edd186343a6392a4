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
store's counts are asked by one script each, in shared pipelines: one read of the keyspace and
a few hundred round trips, however many stores (issue 32: 110 stores read one after another, a
scan each, took 30.4 s on a database of 300,000 keys; 1,000 stores of 300 keys each now take
about a second, ``make bench-reads``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from typing import Any, TypeVar

import redis
from pydantic import Field

from agent_memory.clock import Clock, to_ms
from agent_memory.control.usage import UsageDay
from agent_memory.database.client import database_errors, is_cluster
from agent_memory.database.keys import PREFIX, StoreKeys
from agent_memory.database.partitions import counted, queue_count
from agent_memory.database.scripts import READ_ONLY, load_script, scripts_in_pipeline
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


HOLDING = (
    READ_ONLY
    + """
-- KEYS: the store's live-sessions set, then each memory partition's expiry and superseded sets.
-- ARGV: now (ms), a session's messages key before and after its id, first session, most
-- sessions. What the store holds: {live sessions, their messages, live current memories}, of
-- the sessions from ARGV[4] on, at most ARGV[5] of them (the caller asks again for the rest).
-- Live current memories: live ones less live superseded ones, the rule of
-- database.partitions.counted (MemoryReader.count), with the keys in queue_count's order.
local now = '(' .. ARGV[1]
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], now, '+inf', 'LIMIT', ARGV[4], ARGV[5])
local messages = 0
for _, id in ipairs(ids) do
  messages = messages + redis.call('ZCARD', ARGV[2] .. id .. ARGV[3])
end
local memories = 0
if ARGV[4] == '0' then
  for i = 2, #KEYS, 2 do
    memories = memories + redis.call('ZCOUNT', KEYS[i], now, '+inf')
      - redis.call('ZCOUNT', KEYS[i + 1], now, '+inf')
  end
end
return {#ids, messages, memories}
"""
)

BYTES = (
    READ_ONLY
    + """
-- ARGV: cursor, the store keys' prefix, count. One SCAN step over the store keys, and the MEMORY
-- USAGE of each key found summed by store incarnation (the name up to the second ':' after the
-- prefix): {next cursor, base, bytes, base, bytes...}.
local reply = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2] .. '*', 'COUNT', ARGV[3])
local sums, order = {}, {}
local after = #ARGV[2] + 1
for _, key in ipairs(reply[2]) do
  local first = string.find(key, ':', after, true)
  local second = first and string.find(key, ':', first + 1, true)
  if second then
    local base = string.sub(key, 1, second)
    if not sums[base] then
      sums[base] = 0
      order[#order + 1] = base
    end
    sums[base] = sums[base] + (redis.call('MEMORY', 'USAGE', key) or 0)
  end
end
local found = {reply[1]}
for _, base in ipairs(order) do
  found[#found + 1] = base
  found[#found + 1] = sums[base]
end
return found
"""
)
SESSIONS_PER_CALL = 5000
"""Live sessions one ``HOLDING`` call reads (a ``ZCARD`` each): a few milliseconds of the
server's time at most."""


def instance_holding(client: redis.Redis, configs: Sequence[StoreConfig], clock: Clock) -> Holding:
    """What the stores of ``configs`` (all of one database, on ``client``) hold now, summed:
    ``store_holding`` of each, read together (module docstring). On one server, a script
    per store (``HOLDING``, sent in pipelines of ``BATCH // 10``) and one scan of the store keys
    by a script that sums their bytes by store as it goes (``BYTES``, ``BATCH`` keys a step):
    a few hundred round trips for a database of 300,000 keys, the work on the server. On a
    cluster, where a script's keys share a slot, the same reads as pipelined commands, one
    scan of every node. Errors: ``DatabaseUnavailable``."""
    now_ms = to_ms(clock.now())
    stores = [config.keys() for config in configs]
    bases = {keys.all_pattern.removesuffix("*") for keys in stores}
    cluster = is_cluster(client)
    counts, sizes = (
        (_pipelined_counts, _pipelined_bytes) if cluster else (_scripted_counts, _scripted_bytes)
    )
    # the scan on a second connection meanwhile: the server works on one while this process
    # packs and reads the other's commands
    with database_errors(), ThreadPoolExecutor(1, thread_name_prefix="holding") as side:
        byte_count = side.submit(sizes, client, bases)
        held = counts(client, stores, now_ms)
        return held.model_copy(update={"bytes": byte_count.result()})


def _scripted_counts(client: redis.Redis, stores: list[StoreKeys], now_ms: int) -> Holding:
    """Sessions, messages and memories of ``stores`` by ``HOLDING``, on one server."""
    script = load_script(client, HOLDING)
    totals = [0, 0, 0]
    pending = [(keys, 0) for keys in stores]
    while pending:
        calls: list[tuple[list[str], list[str | int]]] = []
        for keys, first in pending[: BATCH // 10]:
            session = keys.session("\x00").messages
            before, _, after = session.partition("\x00")
            parts = [
                k
                for p in keys.memory_partitions()
                for k in (p.memory_expiry, p.memories_superseded)
            ]
            calls.append(
                ([keys.session_expiry, *parts], [now_ms, before, after, first, SESSIONS_PER_CALL])
            )
        replies = scripts_in_pipeline(client, script, calls)
        following = []
        for (keys, first), reply in zip(pending[: BATCH // 10], replies, strict=True):
            counts = [int(n) for n in reply]
            totals = [t + n for t, n in zip(totals, counts, strict=True)]
            if counts[0] == SESSIONS_PER_CALL:
                following.append((keys, first + SESSIONS_PER_CALL))
        pending = following + pending[BATCH // 10 :]
    return Holding(sessions=totals[0], messages=totals[1], memories=totals[2], bytes=0)


def _scripted_bytes(client: redis.Redis, bases: set[str]) -> int:
    """``MEMORY USAGE`` of the keys of ``bases`` (store incarnations), by ``BYTES``."""
    script = load_script(client, BYTES)
    total, cursor = 0, "0"
    while True:
        reply: Any = script(keys=[], args=[cursor, PREFIX, BATCH])
        cursor = str(reply[0])
        total += sum(
            int(n) for base, n in zip(reply[1::2], reply[2::2], strict=True) if str(base) in bases
        )
        if cursor == "0":
            return total


def _pipelined_counts(client: redis.Redis, stores: list[StoreKeys], now_ms: int) -> Holding:
    """Sessions, messages and memories of ``stores`` in pipelined commands (a cluster)."""
    sessions = messages = memories = 0
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
    return Holding(sessions=sessions, messages=messages, memories=memories, bytes=0)


def _pipelined_bytes(client: redis.Redis, bases: set[str]) -> int:
    """``MEMORY USAGE`` summed over the keys that begin with one of ``bases`` (each a store
    incarnation's ``kividb:mem:<store>:<inc>:``), in one scan of the database's store keys
    (every node's, on a cluster) and pipelined commands. A
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
