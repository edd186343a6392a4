"""The export of a store's memories, page by page (``MemoryTransfer.export``, ``GET
.../export/memories``): the read-only script that reads an actor's records with their vectors
one ``HSCAN`` step at a time, the cursor of a page, and the exported form of a stored memory.

Export reads what is kept as it is kept: every memory (current or superseded) with every field,
its versions and its vector (the stored float32 bytes, base64), actor by actor, each page
within the answer's byte budget, with the server's time it was read (``read_at``: a client
makes an export of a store being written the store at the first page's moment).

Apart from ``memories.transfer`` (the import) because the two share no script and no step: an
export only reads, one actor's slot at a time, and needs none of the import's checks, lock,
claims or writes.
"""

from __future__ import annotations

import base64
import re
import time
from dataclasses import dataclass
from typing import cast

import redis

from agent_memory.answers import DEFAULT_ANSWER_BUDGET, wire_bytes
from agent_memory.clock import Clock, from_ms, to_ms
from agent_memory.database.client import database_errors
from agent_memory.database.keys import StoreKeys
from agent_memory.database.scripts import READ_ONLY, load_script
from agent_memory.errors import ValidationFailed
from agent_memory.memories.forms import converted
from agent_memory.memories.records import MemoryRecord, decode_record, split_memory
from agent_memory.memories.scripts import ACTOR_HELPERS, lua
from agent_memory.memories.transfer_models import (
    MAX_CURSOR_CHARS,
    ExportedMemory,
    MemoryExportPage,
)
from agent_memory.models import MEMORY_ID_PATTERN
from agent_memory.sessions.transfer import int_cursor, items_that_fit

# KEYS: the actor's memories, vectors. ARGV: HSCAN cursor, count, now (ms). {next cursor, ids,
# stored memories, vectors kept apart, links} of one HSCAN step, read in the same atomic step (the
# vectors are those of records kept before vectors moved into them; false for the others). links
# says, for each memory, which of its links name no live memory of the actor at this moment: 1
# its supersedes (an older version whose time is up), 2 its superseded_by, 3 both (0: none).
_EXPORT_MEMORIES = lua(
    READ_ONLY,
    ACTOR_HELPERS
    + """
local now = tonumber(ARGV[3])
local function dead(id)
  if id == nil or id == cjson.null then return false end
  local raw = redis.call('HGET', KEYS[1], id)
  if not raw then return true end
  local expires = cjson.decode(record_json(raw))[$expires_at]
  return not expires or tonumber(expires) <= now
end
local step = redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', ARGV[2])
local ids, records, vectors, links = {}, {}, {}, {}
for i = 1, #step[2], 2 do
  local doc = cjson.decode(record_json(step[2][i + 1]))
  local flags = 0
  if dead(doc[$supersedes]) then flags = flags + 1 end
  if dead(doc[$superseded_by]) then flags = flags + 2 end
  ids[#ids + 1] = step[2][i]
  records[#records + 1] = step[2][i + 1]
  vectors[#vectors + 1] = redis.call('HGET', KEYS[2], step[2][i]) or false
  links[#links + 1] = flags
end
return {step[1], ids, records, vectors, links}
""",
)


@dataclass(frozen=True)
class _ExportCursor:
    """Where an export page starts: an actor ``bucket`` (None: the first) and an ``HSCAN``
    ``step`` of its memories; ``resume`` (the step's next cursor, the last id given) when the
    page before ended inside that step."""

    step: int = 0
    bucket: str | None = None
    resume: tuple[int, str] | None = None

    @classmethod
    def parse(cls, cursor: str | None) -> _ExportCursor:
        """The place ``cursor`` names; ``ValidationFailed`` for a cursor not given by
        ``MemoryTransfer.export``."""
        if cursor is None:
            return cls()
        head, sep, bucket = cursor.partition(":")
        parts = head.split(".")
        if (
            not sep
            or not bucket
            or len(parts) not in (1, 3)
            or (len(parts) == 3 and not re.fullmatch(MEMORY_ID_PATTERN, parts[2]))
        ):
            raise ValidationFailed(
                "The cursor is not one this API gave.",
                details=[{"field": "cursor", "problem": "give the next_cursor of a page"}],
            )
        resume = (int_cursor(parts[1]), parts[2]) if len(parts) == 3 else None
        return cls(int_cursor(parts[0]), bucket, resume)


class MemoryExport:
    """The export of one store's memories (``MemoryTransfer.export``). Errors:
    ``ValidationFailed``, ``DatabaseUnavailable``."""

    def __init__(
        self, client: redis.Redis, binary: redis.Redis, keys: StoreKeys, clock: Clock
    ) -> None:
        self._redis = client
        self._keys = keys
        self._clock = clock
        self._export = load_script(binary, _EXPORT_MEMORIES)

    def page(
        self, cursor: str | None, limit: int, budget: int = DEFAULT_ANSWER_BUDGET
    ) -> MemoryExportPage:
        """About ``limit`` live memories from ``cursor`` on (None for the first page), actor
        buckets in order, no more than keep the answer within ``budget`` bytes as Lambda
        carries it (``answers.wire_bytes``; at least one memory); ``ValidationFailed`` for a
        cursor that is not one of ours. The page ends at a step of the actor's ``HSCAN``
        (cursor ``<hscan cursor>:<bucket>``); when one step of a single hash bucket holds more
        than fits, the page ends inside it (``<step>.<next step>.<last id>:<bucket>``: the step
        is read again and the ids up to the last one given are left out, unless the hash was
        resized meanwhile, when its next step differs: then it is given whole again, as a
        memory may be on two pages). Each memory's links are as of the moment its step was
        read: a link to a memory that is not live then (an older version whose time is up) is
        given as null (``superseded_by`` with its ``valid_until``)."""
        at = _ExportCursor.parse(cursor)
        with database_errors():
            buckets = sorted(str(b) for b in self._redis.smembers(self._keys.memory_actors))
        if at.bucket is not None:
            buckets = [b for b in buckets if b >= at.bucket]
            if not buckets or buckets[0] != at.bucket:
                at = _ExportCursor()  # that actor is gone: go on with the next one
        now_ms = to_ms(self._clock.now())
        read_at = from_ms(now_ms)
        _let_its_millisecond_pass(self._clock, now_ms)
        empty = MemoryExportPage(memories=[], next_cursor="-" * MAX_CURSOR_CHARS, read_at=read_at)
        found: list[ExportedMemory] = []
        used = wire_bytes(empty)
        step, resume, single = at.step, at.resume, False
        while buckets and len(found) < limit:
            count = 1 if resume is not None or single else limit - len(found)
            if found:  # no more than the sizes so far say fit, so that a step is seldom read twice
                count = max(1, min(count, (budget - used) * len(found) // max(used, 1)))
            after, items = self._step(buckets[0], step, count, now_ms)
            if resume is not None:
                if after == resume[0]:  # the same part of the hash: leave out what was given
                    items = [m for m in items if m.id > resume[1]]
                resume = None
            size = sum(wire_bytes(m) - 1 for m in items)  # without its quotes, with a comma
            if used + size > budget and (found or count > 1):
                if found:
                    break  # this step starts the next page
                single = True  # read it again, one hash bucket at a time
                continue
            if used + size > budget:
                # One hash bucket holds more than fits: as many as fit, in id order.
                items.sort(key=lambda m: m.id)
                kept = items_that_fit(empty, items, budget)
                rest = f"{step}.{after}.{items[kept - 1].id}:{buckets[0]}"
                return MemoryExportPage(memories=items[:kept], next_cursor=rest, read_at=read_at)
            found += items
            used += size
            step, single = after, False
            if step == 0:
                buckets.pop(0)
        next_cursor = f"{step}:{buckets[0]}" if buckets else None
        return MemoryExportPage(memories=found, next_cursor=next_cursor, read_at=read_at)

    def _step(
        self, bucket: str, step: int, count: int, now_ms: int
    ) -> tuple[int, list[ExportedMemory]]:
        """One ``HSCAN`` step of the actor's memories from ``step``: the next step (0 at the
        end) and its live memories, each link to a memory not live now given as null."""
        actor = self._keys.actor(bucket)
        with database_errors():
            after, ids, records, vectors, links = self._export(
                keys=[actor.memories, actor.vectors], args=[step, count, now_ms]
            )
        found = []
        for memory_id, raw, apart, dead in zip(ids, records, vectors, links, strict=True):
            record = decode_record(raw, memory_id.decode(), bucket)
            blob = split_memory(raw)[1] or apart
            if record.expires_at <= now_ms or not blob:
                continue
            if int(dead) & 1:
                record = record.model_copy(update={"supersedes": None})
            if int(dead) & 2:
                record = record.model_copy(update={"superseded_by": None, "valid_until": None})
            found.append(_exported_memory(record, cast(bytes, blob)))
        return int(after), found


def _exported_memory(record: MemoryRecord, blob: bytes) -> ExportedMemory:
    """The record as exported, with its vector's bytes in base64."""
    return converted(record, ExportedMemory, vector=base64.b64encode(blob).decode("ascii"))


def _let_its_millisecond_pass(clock: Clock, moment_ms: int) -> None:
    """Return once ``clock`` is past ``moment_ms`` (under a millisecond on a real clock; at most
    two of wall time on one that stands still, as a test's does). Times are kept to the
    millisecond: a write in the same millisecond as ``read_at`` but after the read would
    otherwise be stamped ``read_at`` too and counted as seen by the page when it was not (on one
    clock; writers on other machines' clocks are as right as those clocks are)."""
    deadline = time.monotonic() + 0.002
    while to_ms(clock.now()) <= moment_ms and time.monotonic() < deadline:
        time.sleep(0.0001)
