"""Which memory types a store's memories use: what a store change must not take away.

A memory keeps its type by name, and so do the earlier versions a ``PATCH`` left in it. A
custom type removed from the store's settings while memories still use it would leave them
outside every type filter, and an export of the store would no longer import (an import
accepts only the store's types). ``types_in_use`` counts them, so that ``PUT`` of the store can
refuse the change (``stores.registry.Stores``, its ``type_usage`` port).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import cast

import redis

from agent_memory.clock import Clock, to_ms
from agent_memory.database.client import database_errors
from agent_memory.memories.records import F, raw_record
from agent_memory.stores.models import StoreConfig

SCAN_BATCH = 500
"""Memories read per ``HSCAN`` of an actor's hash (each holds its vector: about 1.5 kB at
384 dimensions, so a batch is under a megabyte)."""


def types_in_use(
    binary: redis.Redis, store: StoreConfig, types: Collection[str], clock: Clock
) -> dict[str, int]:
    """``{type: how many live memories use it}`` for each of ``types`` some memory of ``store``
    uses, as its type or the type of one of its earlier versions; types no memory uses are
    left out. Current and superseded memories count alike (both are read by ``as_of``,
    history and export); expired ones do not. ``binary`` is the store's database with raw
    replies (``database.client.redis_client(url, binary=True)``).

    Reads every memory of the store once, actor by actor (``HSCAN``), so its cost grows with
    the store: about a second per 100,000 memories. It is not a snapshot: a memory of a
    removed type written while it runs may not be counted. Errors: ``DatabaseUnavailable``."""
    wanted = frozenset(types)
    counts: dict[str, int] = {}
    if not wanted:
        return counts
    keys = store.keys()
    now_ms = to_ms(clock.now())
    with database_errors():
        buckets = sorted(m.decode() for m in cast(set[bytes], binary.smembers(keys.memory_actors)))
        for bucket in buckets:
            entries = binary.hscan_iter(keys.actor(bucket).memories, count=SCAN_BATCH)
            for _, raw in cast("Iterator[tuple[bytes, bytes]]", entries):
                record = raw_record(raw)
                if int(record[F.expires_at]) <= now_ms:
                    continue
                used = {record[F.type]} | {v[F.type] for v in record.get(F.versions) or ()}
                for name in used & wanted:
                    counts[name] = counts.get(name, 0) + 1
    return counts
