"""The store-level indexes of a store's memories, and their upkeep.

An actor's memories live on the actor's slot (``database.keys.ActorKeys``); the store keeps, on its
partitions' slots (``database.keys.MemoryIndexKeys``), the listing of current memories, their
expiries, the owner of each id that does not carry its actor's tag, and the superseded ones. Writes
enter a new memory here first (``StoreLevel.index``, ``queue_store_level``); reads and writes both
take expired, forgotten and superseded memories out (``forget``, ``prune``, ``retire``,
``unindex``). ``find_owners`` says which actor holds an id.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import redis
from redis.client import Pipeline
from redis.commands.core import Script
from redis.typing import EncodableT

from agent_memory.clock import to_ms
from agent_memory.database.client import database_errors, unless_writes_refused
from agent_memory.database.keys import NO_ACTOR, StoreKeys, actor_tag, id_tag
from agent_memory.database.partitions import expiries
from agent_memory.database.scripts import load_script, scripts_in_pipeline
from agent_memory.memories.scripts import LOG_KEEP, REMOVE, RETIRE, SCRIPT_IDS, UNINDEX
from agent_memory.stores.database import StoreDatabase

PRUNE_BATCH = 1000
"""Expired memories a read takes out of each partition's indexes at most (the rest, next time;
reads skip expired memories anyway)."""


def queue_store_level(
    pipe: Pipeline, keys: StoreKeys, rows: Sequence[tuple[str, str, int, int]]
) -> None:
    """Queue on ``pipe`` the store-level entries of new current memories, ``rows`` of
    ``(memory id, actor bucket, created ms, expires ms)``: the listing, expiry and owner
    indexes of each one's partition and the store's actor set (``database.keys.StoreKeys``), a few
    commands per partition. Every command sets entries, so sent twice it changes nothing. Bulk
    seeding uses it too (``bench/``), so that its memories are kept as ``Memories.add`` keeps
    them."""
    row_of = {row[0]: row for row in rows}
    for part, ids in keys.by_partition(row_of):
        pipe.zadd(part.memories, {i: row_of[i][2] for i in ids})
        pipe.zadd(part.memory_expiry, {i: row_of[i][3] for i in ids})
        untagged: dict[EncodableT, EncodableT] = {
            i: row_of[i][1] for i in ids if id_tag(i) != actor_tag(row_of[i][1])
        }
        if untagged:
            pipe.hset(part.memory_owners, mapping=untagged)
    buckets = {row[1] for row in rows}
    pipe.sadd(keys.memory_actors, *buckets)
    for bucket in buckets:
        pipe.sadd(keys.actor_tag_set(actor_tag(bucket)), bucket)


def unindex(
    client: redis.Redis, script: Script, keys: StoreKeys, memory_ids: Iterable[str]
) -> None:
    """Take ``memory_ids`` out of the store-level indexes of their partitions (``script`` is
    ``UNINDEX`` loaded for ``client``), in one pipeline. Errors: ``DatabaseUnavailable``."""
    calls: list[tuple[Sequence[str], Sequence[EncodableT]]] = []
    for part, members in keys.by_partition(memory_ids):
        for start in range(0, len(members), SCRIPT_IDS):
            calls.append((part.all(), members[start : start + SCRIPT_IDS]))
    with database_errors():
        scripts_in_pipeline(client, script, calls)


def find_owners(client: redis.Redis, keys: StoreKeys, ids: Iterable[str]) -> dict[str, str]:
    """The actor bucket of each of ``ids`` that the store keeps, expired or not (missing when there
    is none): its owner entry when it has one (an id that does not carry its actor's tag), else the
    bucket of its tag's set (``database.keys.StoreKeys.actor_tag_set``) whose memories hold it. Two
    round trips: the owner entries and the tags' sets, then one ``HEXISTS`` per bucket of those sets
    (usually one per id). Errors: ``DatabaseUnavailable``."""
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return {}
    tags = sorted({id_tag(i) for i in wanted})
    groups = keys.by_partition(wanted)
    with database_errors():
        pipe = client.pipeline(transaction=False)
        for tag in tags:
            pipe.smembers(keys.actor_tag_set(tag))
        for part, members in groups:
            pipe.hmget(part.memory_owners, members)
        replies = pipe.execute()
    buckets = {
        tag: sorted(str(b) for b in found)
        for tag, found in zip(tags, replies[: len(tags)], strict=True)
    }
    owners: dict[str, str] = {}
    for (_, members), found in zip(groups, replies[len(tags) :], strict=True):
        owners.update((i, str(o)) for i, o in zip(members, found, strict=True) if o is not None)
    probes = [(i, b) for i in wanted if i not in owners for b in buckets[id_tag(i)]]
    if probes:
        with database_errors():
            pipe = client.pipeline(transaction=False)
            for memory_id, bucket in probes:
                pipe.hexists(keys.actor(bucket).memories, memory_id)
            held = pipe.execute()
        for (memory_id, bucket), there in zip(probes, held, strict=True):
            if there:
                owners.setdefault(memory_id, bucket)
    return owners


class StoreLevel:
    """The store-level indexes of one store's memories, as reads and writes keep them up.
    Errors: ``DatabaseUnavailable``."""

    def __init__(self, db: StoreDatabase) -> None:
        client = db.client
        self._redis = client
        self._keys = db.keys
        self._clock = db.clock
        self._remove = load_script(client, REMOVE)
        self._unindex_script = load_script(client, UNINDEX)
        self._retire_script = load_script(client, RETIRE)

    def live(self, ids: Iterable[str]) -> set[str]:
        """Which of ``ids`` are live memories (in the expiry index, with an expiry to come)."""
        now_ms = to_ms(self._clock.now())
        return {i for i, e in expiries(self._redis, self._keys, ids).items() if e > now_ms}

    def owners(self, ids: Iterable[str]) -> dict[str, str]:
        """``find_owners`` of ``ids`` in this store."""
        return find_owners(self._redis, self._keys, ids)

    def buckets(self) -> list[str]:
        """Every actor bucket that has held memories in this store, sorted."""
        with database_errors():
            return sorted(str(b) for b in self._redis.smembers(self._keys.memory_actors))

    def commands(
        self, memory_id: str, bucket: str, created_ms: int, expires_ms: int
    ) -> Callable[[Pipeline], object]:
        """Queue the store-level entries of a new memory (listing, expiry, owner, actor set)
        on a pipeline."""

        def queue(pipe: Pipeline) -> None:
            queue_store_level(pipe, self._keys, [(memory_id, bucket, created_ms, expires_ms)])

        return queue

    def index(self, memory_id: str, bucket: str, created_ms: int, expires_ms: int) -> int:
        """Enter a memory in the store's listing, expiry and owner indexes; returns the actor's
        generation, read in the same round trip (a pipeline, not a transaction: the actor's
        keys live in another cluster slot than the store's)."""
        with database_errors():
            pipe = self._redis.pipeline(transaction=False)
            self.commands(memory_id, bucket, created_ms, expires_ms)(pipe)
            pipe.hget(self._keys.actor(bucket).meta, "gen")
            gen = pipe.execute()[-1]
        return int(gen or 0)

    def forget(self, bucket: str, ids: list[str]) -> int:
        """Remove ``ids`` from the actor and the store indexes; returns how many existed."""
        if not ids:
            return 0
        with database_errors():
            removed = int(self._remove(keys=self._keys.actor(bucket).all(), args=[LOG_KEEP, *ids]))
        self.unindex(*ids)
        return removed

    def retire(self, *memory_ids: str) -> None:
        """The store-level step of a supersede (``RETIRE``): the replaced memories leave the
        listing of current memories and are counted as superseded."""
        calls: list[tuple[Sequence[str], Sequence[EncodableT]]] = []
        for memory_id in memory_ids:
            part = self._keys.memory_partition(memory_id)
            calls.append(
                ([part.memories, part.memory_expiry, part.memories_superseded], [memory_id])
            )
        with database_errors():
            scripts_in_pipeline(self._redis, self._retire_script, calls)

    def unindex(self, *memory_ids: str) -> None:
        """Take ids out of the store's listing, expiry, owner and superseded indexes
        (``UNINDEX``, one call per partition and ``SCRIPT_IDS`` ids)."""
        unindex(self._redis, self._unindex_script, self._keys, memory_ids)

    def prune(self) -> None:
        """Remove memories whose time is up (their expiry passed) from every index, unless the
        database refuses writes (full, or a read-only replica): reads skip them anyway."""
        now_ms = to_ms(self._clock.now())
        with database_errors():
            pipe = self._redis.pipeline(transaction=False)
            for part in self._keys.memory_partitions():
                pipe.zrangebyscore(part.memory_expiry, "-inf", now_ms, start=0, num=PRUNE_BATCH)
            expired = [str(i) for found in pipe.execute() for i in found]
        owners = find_owners(self._redis, self._keys, expired)
        by_bucket: dict[str, list[str]] = {}
        for memory_id in expired:
            by_bucket.setdefault(owners.get(memory_id, NO_ACTOR), []).append(memory_id)
        with unless_writes_refused():
            for bucket, ids in by_bucket.items():
                self.forget(bucket, ids)
