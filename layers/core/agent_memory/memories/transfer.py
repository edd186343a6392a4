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

This module holds ``MemoryTransfer`` and the import: each memory's checks, the store's import
lock, the claim of the store-level entries and the writes. The export's paging is
``memories.transfer_export`` (``MemoryExport``), the check of the links
``memories.transfer_chains`` (``_Chains``).
"""

from __future__ import annotations

import base64
import binascii
import secrets
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Literal

import numpy as np
from redis.typing import EncodableT

from agent_memory.answers import DEFAULT_ANSWER_BUDGET
from agent_memory.clock import to_ms
from agent_memory.database.client import database_errors
from agent_memory.database.keys import StoreKeys, actor_bucket, actor_tag, id_tag
from agent_memory.database.partitions import expiries
from agent_memory.database.scripts import FINISHES_WRITE, WRITES, load_script, scripts_in_pipeline
from agent_memory.errors import Conflict, ImportBusy, StoreNotFound, ValidationFailed, VectorInvalid
from agent_memory.memories.forms import converted
from agent_memory.memories.records import MemoryRecord, encode_memory
from agent_memory.memories.scripts import ACTOR_HELPERS, LOG_KEEP, REMOVE, UNINDEX, lua
from agent_memory.memories.store_level import find_owners, unindex
from agent_memory.memories.transfer_chains import _Chains
from agent_memory.memories.transfer_export import MemoryExport
from agent_memory.memories.transfer_models import (
    VECTOR_NORM_TOLERANCE,
    ImportedMemory,
    MemoryExportPage,
    MemoryImportBatch,
    MemoryImportResult,
)
from agent_memory.models import RESERVED_TYPES
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.models import (
    IMPORT_CLOCK_SKEW_SECONDS,
    MAX_MEMORY_TTL_SECONDS,
)
from agent_memory.stores.registry import current_entry

# KEYS: ActorKeys.all(). ARGV: log_keep, the actor's generation the batch was checked at ('' =
# any), then id, stored memory (records.encode_memory) pairs. Keeps each (replacing what that id
# held, a vector kept apart by an older record included; a replaced one drops the kept index),
# bumps the generation and logs the change for each, so warm indexes catch up; returns the
# generation, or -1 (nothing written) when the actor's memories changed since they were checked.
_IMPORT_MEMORIES = lua(
    WRITES,
    ACTOR_HELPERS
    + """
local gen = tonumber(redis.call('HGET', KEYS[4], 'gen') or '0')
if ARGV[2] ~= '' and tonumber(ARGV[2]) ~= gen then return -1 end
local replaced = false
for i = 3, #ARGV, 2 do
  if redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) == 0 then replaced = true end
  redis.call('HDEL', KEYS[2], ARGV[i])
  gen = redis.call('HINCRBY', KEYS[4], 'gen', 1)
  redis.call('ZADD', KEYS[3], gen, string.format('%d', gen) .. ':+:' .. ARGV[i])
end
trim_log(ARGV[1])
if replaced then drop_kept() end
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


class MemoryTransfer:
    """Export and import of one store's memories. Errors: ``ValidationFailed`` (and its
    ``VectorInvalid``), ``StoreNotFound``, ``DatabaseUnavailable``."""

    def __init__(self, db: StoreDatabase) -> None:
        client, binary = db.client, db.binary
        self._redis = client
        self._binary = binary
        self._store = db.config
        self._keys = db.keys
        self._clock = db.clock
        self._exporter = MemoryExport(client, binary, self._keys, db.clock)
        self._import = load_script(binary, _IMPORT_MEMORIES)
        self._remove = load_script(client, REMOVE)
        self._unindex = load_script(client, UNINDEX)
        self._claim = load_script(client, _CLAIM_MEMORIES)
        self._release = load_script(client, _RELEASE_IMPORT)

    def export(
        self, cursor: str | None, limit: int, budget: int = DEFAULT_ANSWER_BUDGET
    ) -> MemoryExportPage:
        """About ``limit`` live memories from ``cursor`` on (None for the first page), within
        ``budget`` bytes as Lambda carries it: ``MemoryExport.page``, which says how a page
        ends and what its cursor holds; ``ValidationFailed`` for a cursor that is not one of
        ours."""
        return self._exporter.page(cursor, limit, budget)

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
                problems.append(
                    {
                        "field": f"memories.{at}.id",
                        "problem": f"the batch gives this id already, as "
                        f"memories.{first[memory.id]}.id",
                    }
                )
            first.setdefault(memory.id, at)
            wrong_types = [f"memories.{at}.type"] if memory.type not in types else []
            wrong_types += [
                f"memories.{at}.versions.{v}.type"
                for v, version in enumerate(memory.versions)
                if version.type not in types
            ]
            problems += [{"field": field, "problem": allowed} for field in wrong_types]
            try:
                blob = _vector_bytes(memory.vector, self._store.dimensions)
            except VectorInvalid as exc:
                problem = str(exc.details[0]["problem"]) if exc.details else exc.message
                problems.append({"field": f"memories.{at}.vector", "problem": problem})
                continue
            if to_ms(memory.expires_at) > latest_ms:
                problem = (
                    f"must be at most {MAX_MEMORY_TTL_SECONDS} s (the largest "
                    "memory_ttl_seconds) and a day from now"
                )
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
                details=[
                    {
                        "field": f"memories.{at}.id",
                        "problem": "a live memory of another actor has this id",
                    }
                ],
            )
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
                args += [
                    memory_id,
                    bucket,
                    record.created_at,
                    record.expires_at,
                    "1" if record.valid_until is None else "0",
                    "0" if id_tag(memory_id) == actor_tag(bucket) else "1",
                ]
            calls.append(
                (
                    [
                        part.memories,
                        part.memories_superseded,
                        part.memory_expiry,
                        part.memory_owners,
                    ],
                    args,
                )
            )
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


def _record(memory: ImportedMemory) -> MemoryRecord:
    """The record an imported memory is kept as (``valid_from`` defaults to ``created_at``)."""
    return converted(memory, MemoryRecord)


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
