"""Reads over the store-level memory indexes split in partitions
(``database.keys.MemoryIndexKeys``): a window of the listing read as if it were one sorted set,
per-id expiries, the live count.

The store-level listing of current memories is split in partitions by memory id
(``database.keys.MemoryIndexKeys``), so that on a cluster it spreads over the shards. A page of the
store-wide listing is a window of the merged order: highest score first and, among equal
scores, the greatest member first, which is exactly ``ZREVRANGE``'s order in each partition,
so the merge of the partitions' orders is the order one sorted set holding every member would
have.

A shallow window (``offset + count`` up to ``DIRECT_WINDOW``) reads the first
``offset + count`` members of every partition and merges them: one pipeline. A deeper one
would read ``partitions x (offset + count)`` members that way; instead it finds the score of
the member at ``offset`` by bisection over the scores (a pipeline of ``ZCOUNT`` per step, at
most about 64 steps over integer scores, which listing scores are: milliseconds), then reads
only the members from that score down: at most ``partitions x (count + ties at that score)``.
The partitions are read one pipeline after another, not in one atomic step, so a window taken
while memories are added may shift by those memories, as a page taken a moment later would.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from typing import Any

import redis
from redis.client import Pipeline

from agent_memory.database.client import database_errors
from agent_memory.database.keys import StoreKeys

DIRECT_WINDOW = 1000
"""Up to this ``offset + count``, a window reads the top of every partition and merges."""


def merged_window(client: redis.Redis, keys: Sequence[str], offset: int, count: int) -> list[str]:
    """Members ``offset`` to ``offset + count - 1`` (0-based) of the sorted sets ``keys`` merged
    in ``ZREVRANGE`` order (score descending, then member descending); fewer at the end.
    Scores must be integers (the deep window bisects over them). Errors: ``redis``
    exceptions (the caller maps them, ``database.client.database_errors``)."""
    if count <= 0:
        return []
    if len(keys) == 1:
        return [str(m) for m in client.zrevrange(keys[0], offset, offset + count - 1)]
    if offset + count <= DIRECT_WINDOW:
        tops = _each(
            client,
            keys,
            lambda pipe, key: pipe.zrevrange(key, 0, offset + count - 1, withscores=True),
        )
        return _merge(tops, offset, count)
    return _deep_window(client, keys, offset, count)


def _deep_window(client: redis.Redis, keys: Sequence[str], offset: int, count: int) -> list[str]:
    ends = _each(client, keys, lambda pipe, key: pipe.zrange(key, 0, 0, withscores=True))
    ends += _each(client, keys, lambda pipe, key: pipe.zrevrange(key, 0, 0, withscores=True))
    scores = [int(score) for found in ends for _, score in found]
    if not scores:
        return []
    # The member at ``offset`` has the least score s with above(s) <= offset, where above(s)
    # counts the members of score greater than s (non-increasing in s).
    low, high = min(scores) - 1, max(scores)  # above(high) = 0 <= offset

    def above(score: int) -> int:
        return sum(_each(client, keys, lambda pipe, key: pipe.zcount(key, f"({score}", "+inf")))

    if above(low) <= offset:
        return []  # fewer than offset + 1 members
    while high - low > 1:
        middle = (low + high) // 2
        if above(middle) <= offset:
            high = middle
        else:
            low = middle
    skip = offset - above(high)
    rest = _each(
        client,
        keys,
        lambda pipe, key: pipe.zrevrangebyscore(
            key, high, "-inf", start=0, num=skip + count, withscores=True
        ),
    )
    return _merge(rest, skip, count)


def _each(client: redis.Redis, keys: Sequence[str], command: Any) -> list[Any]:
    """``command(pipe, key)`` for every key, in one non-transactional pipeline: the replies."""
    pipe = client.pipeline(transaction=False)
    for key in keys:
        command(pipe, key)
    return list(pipe.execute())


def _merge(runs: Sequence[Sequence[tuple[Any, float]]], skip: int, count: int) -> list[str]:
    """Members ``skip`` to ``skip + count - 1`` of ``runs`` (each in ``ZREVRANGE`` order)
    merged in that order."""
    merged = heapq.merge(
        *[[(score, str(member)) for member, score in run] for run in runs], reverse=True
    )
    return [member for _, member in list(merged)[skip : skip + count]]


def expiries(client: redis.Redis, keys: StoreKeys, ids: Iterable[str]) -> dict[str, float]:
    """The expiry (ms) of each of ``ids`` that the store's expiry index holds (its partition's
    ``memories:expiry``; missing when it holds none), one ``ZMSCORE`` per partition in one
    pipeline. Errors: ``DatabaseUnavailable``."""
    groups = keys.by_partition(ids)
    if not groups:
        return {}
    with database_errors():
        pipe = client.pipeline(transaction=False)
        for part, members in groups:
            pipe.zmscore(part.memory_expiry, members)
        replies = pipe.execute()
    return {
        memory_id: float(score)
        for (_, members), scores in zip(groups, replies, strict=True)
        for memory_id, score in zip(members, scores, strict=True)
        if score is not None
    }


def live_count(client: redis.Redis, keys: StoreKeys, now_ms: int) -> int:
    """How many memories of the store are live (current or superseded): their expiry is after
    ``now_ms``; summed over the partitions, one pipeline. Errors: ``DatabaseUnavailable``."""
    with database_errors():
        pipe = client.pipeline(transaction=False)
        for part in keys.memory_partitions():
            pipe.zcount(part.memory_expiry, f"({now_ms}", "+inf")
        return sum(int(n) for n in pipe.execute())


def queue_count(pipe: Pipeline, keys: StoreKeys, now_ms: int) -> int:
    """Queue on ``pipe`` what ``counted`` reads of the store of ``keys``
    (``memories.reads.MemoryReader.count``): two ``ZCOUNT`` per memory partition; how many
    replies they make."""
    for part in keys.memory_partitions():
        pipe.zcount(part.memory_expiry, f"({now_ms}", "+inf")
        pipe.zcount(part.memories_superseded, f"({now_ms}", "+inf")
    return 2 * len(keys.memory_partitions())


def counted(replies: Sequence[Any]) -> int:
    """The live current memories of ``queue_count``'s replies: the live ones less the live
    superseded ones."""
    counts = [int(n) for n in replies]
    return sum(counts[::2]) - sum(counts[1::2])
