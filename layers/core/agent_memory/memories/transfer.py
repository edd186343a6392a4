"""Export and import of a store's memories, losslessly, for moving a store to another database
(``tools/transfer.py`` over the public API; docs/routes.md, "Export and import"). Its sibling
``sessions.transfer`` moves the store's sessions.

Export reads what is kept as it is kept: every memory (current or superseded) with every field,
its versions and its vector (the stored float32 bytes, base64). Import writes it back under the
same id and times. Both are paged:

- ``MemoryTransfer.export`` pages every live memory, actor by actor (HSCAN of each actor's
  records, in one read-only script with their vectors), each page within the answer's byte
  budget, with the server's time it was read (``read_at``: a client makes an export of a store
  being written the store at the first page's moment); ``import_batch`` writes up to
  ``MAX_IMPORT_MEMORIES``.

Import is idempotent: a memory written twice is kept once (a memory is its id). Nothing is
re-derived: texts are not redacted again, vectors not embedded again, memories not
deduplicated (the source did all that when it kept them). Its supersede links are checked
with the batch and the store (``_Chains``): an import makes only chains the API could have
made, so that ``as_of`` never shows two versions of one fact as current.

Keys: the same as the routes that write (``database/keys.py``); every script touches one slot: an
actor's or the store's.
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, cast

import numpy as np
import redis
from redis.typing import EncodableT

from agent_memory.answers import DEFAULT_ANSWER_BUDGET, wire_bytes
from agent_memory.clock import Clock, from_ms, to_ms
from agent_memory.database.client import database_errors
from agent_memory.database.keys import StoreKeys, actor_bucket, actor_tag, id_tag
from agent_memory.database.partitions import expiries
from agent_memory.database.scripts import (
    FINISHES_WRITE,
    READ_ONLY,
    WRITES,
    load_script,
    scripts_in_pipeline,
)
from agent_memory.errors import Conflict, ImportBusy, StoreNotFound, ValidationFailed, VectorInvalid
from agent_memory.memories.models import MEMORY_ID_PATTERN
from agent_memory.memories.records import (
    MemoryRecord,
    StoredSource,
    StoredVersion,
    decode_record,
    encode_memory,
    split_memory,
)
from agent_memory.memories.scripts import ACTOR_HELPERS, LOG_KEEP, REMOVE, UNINDEX, lua
from agent_memory.memories.store_level import find_owners, unindex
from agent_memory.memories.transfer_models import (
    MAX_CURSOR_CHARS,
    VECTOR_NORM_TOLERANCE,
    ExportedMemory,
    ExportedSource,
    ExportedVersion,
    ImportedMemory,
    MemoryExportPage,
    MemoryImportBatch,
    MemoryImportResult,
)
from agent_memory.models import RESERVED_TYPES
from agent_memory.sessions.transfer import int_cursor, items_that_fit
from agent_memory.stores.models import (
    IMPORT_CLOCK_SKEW_SECONDS,
    MAX_MEMORY_TTL_SECONDS,
    StoreConfig,
)
from agent_memory.stores.registry import current_entry

# --- memories ----------------------------------------------------------------------------------

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

# KEYS: ActorKeys.all(). ARGV: log_keep, the actor's generation the batch was checked at ('' =
# any), then id, stored memory (records.encode_memory) pairs. Keeps each (replacing what that id
# held, a vector kept apart by an older record included), bumps the generation and logs the
# change for each, so warm indexes catch up; returns the generation, or -1 (nothing written)
# when the actor's memories changed since they were checked.
_IMPORT_MEMORIES = lua(
    WRITES,
    ACTOR_HELPERS
    + """
local gen = tonumber(redis.call('HGET', KEYS[4], 'gen') or '0')
if ARGV[2] ~= '' and tonumber(ARGV[2]) ~= gen then return -1 end
for i = 3, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  redis.call('HDEL', KEYS[2], ARGV[i])
  gen = redis.call('HINCRBY', KEYS[4], 'gen', 1)
  redis.call('ZADD', KEYS[3], gen, string.format('%d', gen) .. ':+:' .. ARGV[i])
end
trim_log(ARGV[1])
return gen
""",
)


IMPORT_LOCK_MS = 30_000
"""How long a batch import may hold its store's import lock; it expires after that if the
function died holding it (a batch of ``MAX_IMPORT_MEMORIES`` takes well under a second)."""
IMPORT_LOCK_WAIT_SECONDS = 5.0
"""How long an import waits for another import of the same store before it answers 503."""
IMPORT_ATTEMPTS = 5
"""How many times a batch is checked and written when the memories of one of its actors
change under it (a write of the API racing the import), before it answers 409."""


# KEYS: the listing, superseded, expiry and owner indexes of one partition
# (database.keys.MemoryIndexKeys).
# ARGV: now, then id, bucket, created_at, expires_at, '1' (current) or '0' (superseded) for
# each memory of that partition, and '1' (keep an owner entry: the id does not carry its
# actor's tag) or '0' (none, and an entry another actor left is removed). The store-level
# entries of the memories, claimed in one step: {-1, id} (nothing written) when an id is a
# live memory of another actor; else
# {1, id, bucket, ...}: the ids that another actor held but whose time was up (their records
# are to be taken out of that actor's keys).
_CLAIM_MEMORIES = (
    WRITES
    + """
local now = tonumber(ARGV[1])
local stale = {1}
for i = 2, #ARGV, 6 do
  local owner = redis.call('HGET', KEYS[4], ARGV[i])
  if owner and owner ~= ARGV[i + 1] then
    local expiry = redis.call('ZSCORE', KEYS[3], ARGV[i])
    if expiry and tonumber(expiry) > now then return {-1, ARGV[i]} end
    stale[#stale + 1] = ARGV[i]
    stale[#stale + 1] = owner
  end
end
for i = 2, #ARGV, 6 do
  local id = ARGV[i]
  if ARGV[i + 4] == '1' then
    redis.call('ZADD', KEYS[1], ARGV[i + 2], id)
    redis.call('ZREM', KEYS[2], id)
  else
    redis.call('ZREM', KEYS[1], id)
    redis.call('ZADD', KEYS[2], ARGV[i + 3], id)
  end
  redis.call('ZADD', KEYS[3], ARGV[i + 3], id)
  if ARGV[i + 5] == '1' then
    redis.call('HSET', KEYS[4], id, ARGV[i + 1])
  else
    redis.call('HDEL', KEYS[4], id)
  end
end
return stale
"""
)

# KEYS: the store's import lock. ARGV: the token it was taken with. Deletes the lock if it is
# still that token's (it may have expired and been taken by another import meanwhile).
_RELEASE_IMPORT = (
    FINISHES_WRITE
    + """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
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


class MemoryTransfer:
    """Export and import of one store's memories. Errors: ``ValidationFailed`` (and its
    ``VectorInvalid``), ``StoreNotFound``, ``DatabaseUnavailable``."""

    def __init__(
        self, client: redis.Redis, binary: redis.Redis, store: StoreConfig, clock: Clock
    ) -> None:
        self._redis = client
        self._binary = binary
        self._store = store
        self._keys = store.keys()
        self._clock = clock
        self._export = load_script(binary, _EXPORT_MEMORIES)
        self._import = load_script(binary, _IMPORT_MEMORIES)
        self._remove = load_script(client, REMOVE)
        self._unindex = load_script(client, UNINDEX)
        self._claim = load_script(client, _CLAIM_MEMORIES)
        self._release = load_script(client, _RELEASE_IMPORT)

    def export(
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

    def import_batch(self, batch: MemoryImportBatch) -> MemoryImportResult:
        """Keep every memory of ``batch`` under its own id, times and links (replacing what
        an id held), with the store-level entries a kept memory has (listing of current
        memories or the superseded index, expiry, owner, actor set). Everything is checked
        before anything is written: ``ValidationFailed`` with ``details`` naming
        ``memories.<i>.<field>`` (a type the store lacks, a vector of another length or
        not finite or all zeros, one that is not base64 float32, an id given twice, an
        ``expires_at`` past now plus the largest ``memory_ttl_seconds`` and a day, and a
        link the batch and the store contradict: ``_Chains``). Memories whose ``expires_at``
        has passed are left out and named in ``expired``. ``Conflict`` (nothing written)
        when an id is a live memory of another actor in this store: a memory never changes
        actor, and writing it under the new one would leave the old actor's copy, which a
        ``DELETE`` of the id would not reach; also when the memories of one of its actors
        changed under it ``IMPORT_ATTEMPTS`` times in a row (each actor's records are
        written only if they are still those the links were checked against, else checked
        again). ``StoreNotFound`` when the store was deleted (or made again) meanwhile: what
        this call wrote is taken back."""
        now_ms = to_ms(self._clock.now())
        rows, expired, first, problems = self._checked(batch, now_ms)
        if problems:
            _refuse(problems + _Chains(self._binary, self._keys, batch, now_ms).problems())
        if not rows:
            return MemoryImportResult(imported=0, expired=expired)
        with database_errors(), self._exclusive():
            claimed = False  # store-level entries written by an attempt that did not finish
            for _ in range(IMPORT_ATTEMPTS):
                chains = _Chains(self._binary, self._keys, batch, now_ms)
                problems = chains.problems()
                if problems and claimed:
                    self._unclaim(rows)
                _refuse(problems)
                written = self._write(rows, first, now_ms, chains.gens)
                if written == "all":
                    return MemoryImportResult(imported=len(rows), expired=expired)
                claimed = claimed or written == "partly"
            if claimed:
                self._unclaim(rows)
        raise Conflict(
            "The memories of an actor of this batch kept changing while it was imported; send "
            "the batch again."
        )

    def _checked(
        self, batch: MemoryImportBatch, now_ms: int
    ) -> tuple[list[tuple[MemoryRecord, bytes]], list[str], dict[str, int], list[dict[str, str]]]:
        """The records and vector bytes of ``batch``'s memories to keep, the ids of those whose
        time is up, the first place of each id in the batch, and each problem of a field
        (see ``import_batch``; the links are ``_Chains``'s)."""
        types = {*RESERVED_TYPES, *(t.name for t in self._store.custom_types)}
        latest_ms = now_ms + (MAX_MEMORY_TTL_SECONDS + IMPORT_CLOCK_SKEW_SECONDS) * 1000
        problems: list[dict[str, str]] = []
        rows: list[tuple[MemoryRecord, bytes]] = []
        expired: list[str] = []
        allowed = f"must be one of: {', '.join(sorted(types))}"
        first: dict[str, int] = {}
        for at, memory in enumerate(batch.memories):
            if memory.id in first:
                problems.append({"field": f"memories.{at}.id",
                                 "problem": f"the batch gives this id already, as "
                                            f"memories.{first[memory.id]}.id"})  # fmt: skip
            first.setdefault(memory.id, at)
            wrong_types = [f"memories.{at}.type"] if memory.type not in types else []
            wrong_types += [f"memories.{at}.versions.{v}.type"
                            for v, version in enumerate(memory.versions)
                            if version.type not in types]  # fmt: skip
            problems += [{"field": field, "problem": allowed} for field in wrong_types]
            try:
                blob = _vector_bytes(memory.vector, self._store.dimensions)
            except VectorInvalid as exc:
                problem = str(exc.details[0]["problem"]) if exc.details else exc.message
                problems.append({"field": f"memories.{at}.vector", "problem": problem})
                continue
            if to_ms(memory.expires_at) > latest_ms:
                problem = (f"must be at most {MAX_MEMORY_TTL_SECONDS} s (the largest "
                           "memory_ttl_seconds) and a day from now")  # fmt: skip
                problems.append({"field": f"memories.{at}.expires_at", "problem": problem})
            elif to_ms(memory.expires_at) <= now_ms:
                expired.append(memory.id)
            else:
                rows.append((_record(memory), blob))
        return rows, expired, first, problems

    def _write(
        self,
        rows: list[tuple[MemoryRecord, bytes]],
        first: dict[str, int],
        now_ms: int,
        gens: dict[str, int],
    ) -> Literal["all", "nothing", "partly"]:
        """Write checked ``rows`` (the store's import lock held): the store-level entries, the
        records actor by actor, each only if the actor's generation is still the one of
        ``gens`` (the records the links were checked against: else the caller checks again),
        then the check that the store is still the one they were checked for (else they are
        taken back: ``StoreNotFound``). What it wrote: ``all``, ``nothing`` (an actor's
        memories changed before it began) or ``partly`` (they changed while it wrote: the
        store-level entries and the records of the actors before are written). ``Conflict``
        (nothing written) for an id that is a live memory of another actor."""
        by_bucket: dict[str, list[tuple[MemoryRecord, bytes]]] = {}
        for record, blob in rows:
            by_bucket.setdefault(actor_bucket(record.actor_id), []).append((record, blob))
        pipe = self._binary.pipeline(transaction=False)
        for bucket in by_bucket:
            pipe.hget(self._keys.actor(bucket).meta, "gen")
        if [int(g or 0) for g in pipe.execute()] != [gens.get(b) for b in by_bucket]:
            return "nothing"
        stale = self._index(rows, now_ms)
        if isinstance(stale, str):
            at = first[stale]
            raise Conflict(
                f"Memory '{stale}' is another actor's memory in this store; a memory "
                "never changes actor. Nothing was written.",
                details=[{"field": f"memories.{at}.id",
                          "problem": "a live memory of another actor has this id"}],
            )  # fmt: skip
        for memory_id, bucket in stale:
            self._remove(keys=self._keys.actor(bucket).all(), args=[LOG_KEEP, memory_id])
        for bucket, items in by_bucket.items():
            args: list[str | bytes | int] = [LOG_KEEP, gens.get(bucket, "")]
            for record, blob in items:
                args += [record.id, encode_memory(record, blob)]
            if int(self._import(keys=self._keys.actor(bucket).all(), args=args)) == -1:
                return "partly"
        raw = self._redis.hget(StoreKeys.registry, self._store.name)
        entry = current_entry(raw, self._store)
        if entry is None or (entry.get("dimensions"), entry.get("embed_model")) != (
            self._store.dimensions,
            self._store.embed_model,
        ):
            self._take_back(by_bucket)
            raise StoreNotFound(self._store.name)
        return "all"

    def _unclaim(self, rows: list[tuple[MemoryRecord, bytes]]) -> None:
        """Take the store-level entries of ``rows`` whose record is not kept out again: what an
        attempt that did not finish left (an id the store already kept stays as its record
        is)."""
        pipe = self._binary.pipeline(transaction=False)
        for record, _ in rows:
            pipe.hexists(self._keys.actor(actor_bucket(record.actor_id)).memories, record.id)
        kept = pipe.execute()
        missing = [record.id for (record, _), there in zip(rows, kept, strict=True) if not there]
        if missing:
            unindex(self._redis, self._unindex, self._keys, missing)

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Hold the store's import lock (``database.keys.StoreKeys.memory_import_lock``:
        ``SET NX PX`` with a token of this call, released by a script that deletes only that token)
        for the block, waiting up to ``IMPORT_LOCK_WAIT_SECONDS`` for another import of the store to
        end: ``ImportBusy`` (503, retried by the client) after that. Imports of one store thus run
        one at a time, which is what makes reading an id's owner and claiming it one step for them
        (``_index``), an id made for its actor needing no owner entry."""
        token = secrets.token_hex(8)
        lock = self._keys.memory_import_lock
        deadline = time.monotonic() + IMPORT_LOCK_WAIT_SECONDS
        while not self._redis.set(lock, token, nx=True, px=IMPORT_LOCK_MS):
            if time.monotonic() >= deadline:
                raise ImportBusy("Another import into this store is running; retry in a moment.")
            time.sleep(0.02)
        try:
            yield
        finally:
            self._release(keys=[lock], args=[token])

    def _index(
        self, rows: Sequence[tuple[MemoryRecord, bytes]], now_ms: int
    ) -> str | list[tuple[str, str]]:
        """Claim the store-level entries of ``rows``: the id of a row that is a live memory of
        another actor (nothing written then), else the ``(id, actor bucket)`` of the rows
        another actor held until their time ran out.

        The rows' owners and expiries are first read (``memories.store_level.find_owners``), so that
        a batch with such an id writes nothing; then each partition's entries are claimed
        in one step (``_CLAIM_MEMORIES``: setting entries, so sent again after a timeout it
        changes nothing), and the actors entered in the store's actor set. An id that carries
        its actor's tag gets no owner entry, so the partition's step cannot see who holds it:
        the read and the claim are one step for imports because imports of a store run one at
        a time (``_exclusive``); without that, two imports of one id under two actors at once
        could both be kept. (Adds make fresh random ids; no import can race them.)"""
        by_part = self._keys.by_partition(record.id for record, _ in rows)
        row_of = {record.id: record for record, _ in rows}
        owners = find_owners(self._redis, self._keys, row_of)
        expiry_of = expiries(self._redis, self._keys, row_of)
        stale: dict[str, str] = {}
        for memory_id, owner in owners.items():
            if owner != actor_bucket(row_of[memory_id].actor_id):
                expiry = expiry_of.get(memory_id)
                if expiry is not None and expiry > now_ms:
                    return memory_id
                stale[memory_id] = owner
        calls: list[tuple[Sequence[str], Sequence[EncodableT]]] = []
        for part, ids in by_part:
            args: list[EncodableT] = [now_ms]
            for memory_id in ids:
                record = row_of[memory_id]
                bucket = actor_bucket(record.actor_id)
                args += [memory_id, bucket, record.created_at, record.expires_at,
                         "1" if record.valid_until is None else "0",
                         "0" if id_tag(memory_id) == actor_tag(bucket) else "1"]  # fmt: skip
            calls.append(([part.memories, part.memories_superseded, part.memory_expiry,
                           part.memory_owners], args))  # fmt: skip
        buckets = {actor_bucket(r.actor_id) for r, _ in rows}
        pipe = self._redis.pipeline(transaction=False)
        pipe.sadd(self._keys.memory_actors, *buckets)
        for bucket in buckets:
            pipe.sadd(self._keys.actor_tag_set(actor_tag(bucket)), bucket)
        pipe.execute()
        for reply in scripts_in_pipeline(self._redis, self._claim, calls):
            if int(reply[0]) == -1:
                return str(reply[1])
            flat = [str(v) for v in reply[1:]]
            stale.update(zip(flat[::2], flat[1::2], strict=True))
        return list(stale.items())

    def _take_back(self, by_bucket: dict[str, list[tuple[MemoryRecord, bytes]]]) -> None:
        with database_errors():
            for bucket, items in by_bucket.items():
                ids = [r.id for r, _ in items]
                self._remove(keys=self._keys.actor(bucket).all(), args=[LOG_KEEP, *ids])
                unindex(self._redis, self._unindex, self._keys, ids)


def _refuse(problems: list[dict[str, str]]) -> None:
    """``ValidationFailed`` naming every problem, memory by memory in batch order (nothing
    when there is none)."""
    if problems:
        problems = sorted(problems, key=lambda p: int(p["field"].split(".")[1]))
        raise ValidationFailed("Some memories are not valid; see details.", details=problems)


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
    still that (``_IMPORT_MEMORIES``), so a write racing the import is checked too."""

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
        self._load([(link.bucket, link.id) for link in live]
                   + [(link.bucket, other) for link in live
                      for other in (link.supersedes, link.superseded_by)
                      if other is not None and other not in self._batch])  # fmt: skip
        olds = [self._stored.get((link.bucket, link.id)) for link in live]
        self._load([(old.bucket, other) for old in olds if old is not None
                    for other in (old.supersedes, old.superseded_by)
                    if other is not None and other not in self._batch])  # fmt: skip
        found: list[dict[str, str]] = []
        for link in live:
            at = self._at[link.id]
            for field, problem in (
                self._successor(link) + self._predecessor(link) + self._forks(link)
                + self._cycle(link)
            ):  # fmt: skip
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
        name = link.superseded_by
        other = self._node(name, link.bucket)
        if other is None or (other.stored and other.expires_at <= self._now):
            problem = "names no live memory of this actor in this batch or this store: a "
            return [("superseded_by", problem + "memory that was replaced needs its successor")]
        if other.bucket != link.bucket:
            return [("superseded_by", f"names {name}, another actor's memory: a chain is one "
                     "actor's")]  # fmt: skip
        if other.expires_at <= self._now:
            return [("superseded_by", f"names {name}, whose time is up (its expires_at has "
                     "passed): this memory would have no current version")]  # fmt: skip
        if other.supersedes != link.id:
            return [("superseded_by", f"names {name}, whose supersedes is "
                     f"{other.supersedes or 'null'}, not this memory")]  # fmt: skip
        if other.valid_from != link.valid_until:
            return [("valid_until", f"must be the valid_from of {name}, the memory that "
                     "replaced it")]  # fmt: skip
        return []

    def _predecessor(self, link: _Link) -> list[tuple[str, str]]:
        if link.supersedes is None:
            return []
        name = link.supersedes
        other = self._node(name, link.bucket)
        if other is None:
            return [("supersedes", "names no memory of this actor in this batch or this store")]
        if other.bucket != link.bucket:
            return [("supersedes", f"names {name}, another actor's memory: a chain is one "
                     "actor's")]  # fmt: skip
        if other.superseded_by != link.id:
            return [("supersedes", f"names {name}, whose superseded_by is "
                     f"{other.superseded_by or 'null'}, not this memory")]  # fmt: skip
        if other.valid_until != link.valid_from:
            return [("valid_from", f"must be the valid_until of {name}, the memory it "
                     "replaced")]  # fmt: skip
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
                found.append(("superseded_by", f"memory {other.id} of this store supersedes "
                              "this one: a memory is replaced by one memory at most"))  # fmt: skip
        if old.supersedes not in (None, link.supersedes):
            other = self._node(str(old.supersedes), link.bucket)
            if (
                other is not None
                and other.bucket == link.bucket
                and (other.superseded_by == link.id)
            ):
                found.append(("supersedes", f"memory {other.id} of this store is replaced by "
                              "this one: a memory replaces one memory at most"))  # fmt: skip
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
                return [("superseded_by", "makes a cycle: following superseded_by comes back "
                         "to this memory")]  # fmt: skip
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


def _exported_memory(record: MemoryRecord, blob: bytes) -> ExportedMemory:
    source = record.source
    return ExportedMemory(
        id=record.id,
        text=record.text,
        type=record.type,
        actor_id=record.actor_id,
        topics=record.topics,
        metadata=record.metadata,
        importance=record.importance,
        confidence=record.confidence,
        created_at=from_ms(record.created_at),
        updated_at=from_ms(record.updated_at),
        expires_at=from_ms(record.expires_at),
        source=ExportedSource(**source.model_dump()) if source is not None else None,
        versions=[
            ExportedVersion(**{**v.model_dump(), "changed_at": from_ms(v.changed_at)})
            for v in record.versions
        ],
        occurred_at=from_ms(record.occurred_at) if record.occurred_at is not None else None,
        valid_from=from_ms(record.valid_from or record.created_at),
        valid_until=from_ms(record.valid_until) if record.valid_until is not None else None,
        supersedes=record.supersedes,
        superseded_by=record.superseded_by,
        vector=base64.b64encode(blob).decode("ascii"),
    )


def _record(memory: ImportedMemory) -> MemoryRecord:
    source = memory.source
    return MemoryRecord(
        id=memory.id,
        text=memory.text,
        type=memory.type,
        actor_id=memory.actor_id,
        topics=memory.topics,
        metadata=memory.metadata,
        importance=memory.importance,
        confidence=memory.confidence,
        created_at=to_ms(memory.created_at),
        updated_at=to_ms(memory.updated_at),
        expires_at=to_ms(memory.expires_at),
        source=StoredSource(**source.model_dump()) if source is not None else None,
        versions=[
            StoredVersion(**{**v.model_dump(), "changed_at": to_ms(v.changed_at)})
            for v in memory.versions
        ],
        occurred_at=to_ms(memory.occurred_at) if memory.occurred_at is not None else None,
        valid_from=to_ms(memory.valid_from or memory.created_at),
        valid_until=to_ms(memory.valid_until) if memory.valid_until is not None else None,
        supersedes=memory.supersedes,
        superseded_by=memory.superseded_by,
    )


def _vector_bytes(text: str, dimensions: int) -> bytes:
    """The float32 bytes of a base64 vector: ``dimensions`` finite values, not all zeros;
    kept as they are when of length 1 (within ``VECTOR_NORM_TOLERANCE``), else scaled to it.
    ``VectorInvalid`` otherwise."""

    def invalid(problem: str) -> VectorInvalid:
        return VectorInvalid(
            f"vector: {problem}", details=[{"field": "vector", "problem": problem}]
        )

    try:
        blob = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise invalid("must be base64 of little-endian float32 values") from None
    if len(blob) != dimensions * 4:
        raise invalid(f"expected {dimensions} dimensions, got {len(blob) / 4:g}")
    vector = np.frombuffer(blob, dtype="<f4")
    if not np.all(np.isfinite(vector)):
        raise invalid("values must be finite")
    norm = float(np.linalg.norm(vector.astype(np.float64)))
    if norm == 0.0:
        raise invalid("must not be all zeros")
    if abs(norm - 1.0) <= VECTOR_NORM_TOLERANCE:
        return blob
    return (vector.astype(np.float64) / norm).astype("<f4").tobytes()
