"""The check of an import batch's supersede links (``_Chains``), against the batch and the store:
an import makes only chains the API could have made, so that ``as_of`` never shows two versions
of one fact as current.

Apart from ``memories.transfer`` (the import's checks of each memory and its writes) because it
is a graph check of its own: it reads each link's other end, in the batch or in the store (with
its actor's generation, which the import's write then holds to), and walks successors, where the
rest of the import looks at one memory at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import redis

from agent_memory.clock import to_ms
from agent_memory.database.client import database_errors
from agent_memory.database.keys import StoreKeys, actor_bucket
from agent_memory.memories.records import MemoryRecord, decode_record
from agent_memory.memories.transfer_models import ImportedMemory, MemoryImportBatch


@dataclass(frozen=True)
class _Link:
    """A memory's place in its chain: what a link check reads of it, from the batch being
    imported (``stored`` False) or from the store (True). Times in ms."""

    id: str
    bucket: str
    supersedes: str | None
    superseded_by: str | None
    valid_from: int
    valid_until: int | None
    expires_at: int
    stored: bool


_LINK_ENDS: dict[str, tuple[str, str, str, str]] = {
    "superseded_by": ("supersedes", "valid_until", "valid_from", "the memory that replaced it"),
    "supersedes": ("superseded_by", "valid_from", "valid_until", "the memory it replaced"),
}
"""For each link of a memory, what ``_Chains._other_end`` reads: the other end's field that
names the memory back, the memory's time and the other end's time that must be equal, and
what the other end is to the memory."""


class _Chains:
    """The supersede links of an import batch, checked against the batch and the store: the
    chains they make must be ones the API could have made (``memories.writes``' supersede,
    docs/design.md "Memories that change"). For each memory of the batch whose time is not up:

    - ``superseded_by`` names a live memory of the same actor, of the batch or the store,
      whose ``supersedes`` names it back and whose ``valid_from`` is its ``valid_until``;
    - ``supersedes`` names a memory of the same actor, of the batch or the store (one whose
      time is up too: an older version expires on its own), whose ``superseded_by`` names it
      back and whose ``valid_until`` is its ``valid_from``;
    - no memory of the store that the batch does not replace names it as well (that would
      make two successors or two predecessors: a fork);
    - following ``superseded_by`` never comes back to it (a cycle: only chains of
      zero-length intervals, all at one time, could).

    The batch stands in for the store where both hold an id. ``gens`` holds each actor's
    generation read before its records: the import writes an actor's memories only if it is
    still that (``memories.transfer._IMPORT_MEMORIES``), so a write racing the import is
    checked too."""

    def __init__(
        self, binary: redis.Redis, keys: StoreKeys, batch: MemoryImportBatch, now_ms: int
    ) -> None:
        self._binary = binary
        self._keys = keys
        self._now = now_ms
        self._batch: dict[str, _Link] = {}
        self._at: dict[str, int] = {}
        for at, memory in enumerate(batch.memories):
            if memory.id not in self._batch:
                self._batch[memory.id] = _link_of(memory)
                self._at[memory.id] = at
        self._stored: dict[tuple[str, str], _Link | None] = {}
        self.gens: dict[str, int] = {}

    def problems(self) -> list[dict[str, str]]:
        """Every problem of the batch's links, as ``details``."""
        live = [link for link in self._batch.values() if link.expires_at > self._now]
        self._load(
            [(link.bucket, link.id) for link in live]
            + [
                (link.bucket, other)
                for link in live
                for other in (link.supersedes, link.superseded_by)
                if other is not None and other not in self._batch
            ]
        )
        olds = [self._stored.get((link.bucket, link.id)) for link in live]
        self._load(
            [
                (old.bucket, other)
                for old in olds
                if old is not None
                for other in (old.supersedes, old.superseded_by)
                if other is not None and other not in self._batch
            ]
        )
        found: list[dict[str, str]] = []
        for link in live:
            at = self._at[link.id]
            for field, problem in (
                self._successor(link)
                + self._predecessor(link)
                + self._forks(link)
                + self._cycle(link)
            ):
                found.append({"field": f"memories.{at}.{field}", "problem": problem})
        return found

    def _load(self, wanted: Sequence[tuple[str, str]]) -> None:
        """Read the stored records of ``wanted`` (``(bucket, id)``) not read yet, each
        actor's generation first (one round trip)."""
        wanted = list(dict.fromkeys(w for w in wanted if w not in self._stored))
        if not wanted:
            return
        by_bucket: dict[str, list[str]] = {}
        for bucket, memory_id in wanted:
            by_bucket.setdefault(bucket, []).append(memory_id)
        pipe = self._binary.pipeline(transaction=False)
        unread = [b for b in by_bucket if b not in self.gens]
        for bucket in unread:
            pipe.hget(self._keys.actor(bucket).meta, "gen")
        for bucket, ids in by_bucket.items():
            pipe.hmget(self._keys.actor(bucket).memories, ids)
        with database_errors():
            replies = pipe.execute()
        for bucket, gen in zip(unread, replies, strict=False):
            self.gens[bucket] = int(gen or 0)
        for (bucket, ids), raws in zip(by_bucket.items(), replies[len(unread) :], strict=True):
            for memory_id, raw in zip(ids, raws, strict=True):
                record = None if raw is None else decode_record(raw, memory_id, bucket)
                self._stored[(bucket, memory_id)] = (
                    None if record is None else _stored_link(record, bucket)
                )

    def _node(self, memory_id: str, bucket: str) -> _Link | None:
        """The memory ``memory_id`` as the batch gives it, else as the actor ``bucket`` keeps
        it (None when it does not)."""
        if memory_id in self._batch:
            return self._batch[memory_id]
        self._load([(bucket, memory_id)])
        return self._stored[(bucket, memory_id)]

    def _successor(self, link: _Link) -> list[tuple[str, str]]:
        if link.superseded_by is None:
            return []
        other = self._node(link.superseded_by, link.bucket)
        if other is None or (other.stored and other.expires_at <= self._now):
            problem = "names no live memory of this actor in this batch or this store: a "
            return [("superseded_by", problem + "memory that was replaced needs its successor")]
        return self._other_end(link, "superseded_by", other)

    def _predecessor(self, link: _Link) -> list[tuple[str, str]]:
        if link.supersedes is None:
            return []
        other = self._node(link.supersedes, link.bucket)
        if other is None:
            return [("supersedes", "names no memory of this actor in this batch or this store")]
        return self._other_end(link, "supersedes", other)

    def _other_end(
        self, link: _Link, field: Literal["superseded_by", "supersedes"], other: _Link
    ) -> list[tuple[str, str]]:
        """What is wrong with ``other``, the memory that ``link``'s ``field`` names (its
        successor for ``superseded_by``, its predecessor for ``supersedes``; ``_LINK_ENDS``),
        the first problem only: another actor's memory (a chain is one actor's), a successor
        whose time is up, a memory that does not name ``link`` back, or times that do not meet
        (the successor's ``valid_from`` is its predecessor's ``valid_until``)."""
        name = getattr(link, field)
        back, own_time, its_time, which = _LINK_ENDS[field]
        if other.bucket != link.bucket:
            return [(field, f"names {name}, another actor's memory: a chain is one actor's")]
        if field == "superseded_by" and other.expires_at <= self._now:
            return [
                (
                    field,
                    f"names {name}, whose time is up (its expires_at has "
                    "passed): this memory would have no current version",
                )
            ]
        if getattr(other, back) != link.id:
            return [
                (
                    field,
                    f"names {name}, whose {back} is "
                    f"{getattr(other, back) or 'null'}, not this memory",
                )
            ]
        if getattr(other, its_time) != getattr(link, own_time):
            return [(own_time, f"must be the {its_time} of {name}, {which}")]
        return []

    def _forks(self, link: _Link) -> list[tuple[str, str]]:
        """A memory of the store that the batch leaves as it is and that names ``link``'s id
        (its successor or predecessor as the store has it) while the batch names another."""
        old = self._stored.get((link.bucket, link.id))
        if old is None or old.expires_at <= self._now:
            return []
        found = []
        if old.superseded_by not in (None, link.superseded_by):
            other = self._node(str(old.superseded_by), link.bucket)
            if (
                other is not None
                and other.expires_at > self._now
                and (other.bucket == link.bucket and other.supersedes == link.id)
            ):
                found.append(
                    (
                        "superseded_by",
                        f"memory {other.id} of this store supersedes "
                        "this one: a memory is replaced by one memory at most",
                    )
                )
        if old.supersedes not in (None, link.supersedes):
            other = self._node(str(old.supersedes), link.bucket)
            if (
                other is not None
                and other.bucket == link.bucket
                and (other.superseded_by == link.id)
            ):
                found.append(
                    (
                        "supersedes",
                        f"memory {other.id} of this store is replaced by "
                        "this one: a memory replaces one memory at most",
                    )
                )
        return found

    def _cycle(self, link: _Link) -> list[tuple[str, str]]:
        """Whether following ``superseded_by`` comes back to ``link``: with every successor's
        ``valid_from`` its predecessor's ``valid_until``, only through intervals of no length
        at ``link``'s one time, so the walk stops at the first other one."""
        at = link.valid_from
        if link.superseded_by is None or link.valid_until != at:
            return []
        seen, current = {link.id}, link
        while current.superseded_by is not None:
            after = self._node(current.superseded_by, link.bucket)
            if after is None:
                return []
            if after.id == link.id:
                return [
                    (
                        "superseded_by",
                        "makes a cycle: following superseded_by comes back to this memory",
                    )
                ]
            if after.id in seen or (after.valid_from, after.valid_until) != (at, at):
                return []
            seen.add(after.id)
            current = after
        return []


def _link_of(memory: ImportedMemory) -> _Link:
    return _Link(
        id=memory.id,
        bucket=actor_bucket(memory.actor_id),
        supersedes=memory.supersedes,
        superseded_by=memory.superseded_by,
        valid_from=to_ms(memory.valid_from or memory.created_at),
        valid_until=to_ms(memory.valid_until) if memory.valid_until is not None else None,
        expires_at=to_ms(memory.expires_at),
        stored=False,
    )


def _stored_link(record: MemoryRecord, bucket: str) -> _Link:
    return _Link(
        id=record.id,
        bucket=bucket,
        supersedes=record.supersedes,
        superseded_by=record.superseded_by,
        valid_from=record.valid_from or record.created_at,
        valid_until=record.valid_until,
        expires_at=record.expires_at,
        stored=True,
    )
