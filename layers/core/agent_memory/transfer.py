"""Export and import of a store's sessions and memories, losslessly, for moving a store to
another database (``tools/transfer.py`` over the public API; docs/routes.md, "Export and
import").

Export reads what is kept as it is kept: a session's whole state (its messages with their
sequence numbers, summary, extraction cursor and outcome) and every memory (current or
superseded) with every field, its versions and its vector (the stored float32 bytes, base64).
Import writes that state back under the same ids, sequence numbers and times. Both are paged:

- ``SessionTransfer.ids`` pages the store's live session ids (ZSCAN of the expiry index: a
  session live for the whole listing is listed at least once; the tool drops repeats);
  ``export`` pages one session's messages by sequence number; ``import_page`` writes one page.
- ``MemoryTransfer.export`` pages every live memory, actor by actor (HSCAN of each actor's
  records, in one read-only script with their vectors); ``import_batch`` writes up to
  ``MAX_IMPORT_MEMORIES``.

Import is idempotent: a session page or a memory written twice is kept once (a message is its
sequence number and content; a memory is its id), and it never moves a session back (a
counter or cursor only grows; a summary, a pending answer and the extraction outcome are taken
only from a state at least as far as the one kept). It refuses (409) a session id that
another session holds in the target store, or a sequence number that holds another message
there. Nothing is re-derived: texts are not redacted again, vectors not embedded again,
memories not deduplicated (the source did all that when it kept them).

Keys: the same as the routes that write (``keys.py``); every script touches one slot: a
session's, an actor's or the store's.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, cast

import numpy as np
import redis
from pydantic import AfterValidator, Field, StringConstraints, model_validator

from agent_memory.clock import Clock, from_ms, to_ms
from agent_memory.db import READ_ONLY, WRITES, database_errors, load_script
from agent_memory.errors import (
    Conflict,
    SessionNotFound,
    StoreNotFound,
    ValidationFailed,
    VectorInvalid,
)
from agent_memory.keys import StoreKeys, actor_bucket
from agent_memory.memory_scripts import LOG_KEEP, REMOVE, UNINDEX, lua
from agent_memory.models import (
    MAX_MESSAGE_CHARS,
    MAX_RECENT,
    MAX_TOPICS,
    MAX_VERSIONS,
    RESERVED_TYPES,
    ActorId,
    MemoryId,
    MemoryText,
    Metadata,
    Model,
    Role,
    SessionId,
    SpeakerName,
    StoreConfig,
    Topic,
    UnitInterval,
    UtcDatetime,
    View,
)
from agent_memory.records import MemoryRecord, StoredSource, StoredVersion, encode_record
from agent_memory.sessions import ARM_STALE_MS, TOUCH_INDEXES, TOUCH_PRUNE_BATCH, encode_message
from agent_memory.stores import current_entry

MAX_IMPORT_MEMORIES = 100
"""Memories per import call (and the most an export page holds, ``limit``)."""
MAX_EXPORT_MESSAGES = MAX_RECENT
"""Messages per session export page (1,000)."""
MAX_IMPORT_MESSAGES = 200
"""Messages per session import call: 200 of the longest (32,000 characters) are over the 1 MiB
body limit anyway, and the bound keeps the body of any one refused field under it, so that
a body that breaks it is a 422 naming the field, not a 413."""
MAX_SUMMARY_CHARS = 8_000
MAX_ERROR_CHARS = 2_000
MAX_PENDING_CHARS = 256_000
"""A pending extraction answer (the model's memories not all kept yet), as the session keeps
it: JSON of at most ``prompts.MAX_MEMORIES_PER_RUN`` (50) items of at most
``prompts.MAX_MEMORY_CHARS`` (2,000) characters of text and their topics, about 150,000
characters at most; the bound keeps a body that passes it well under the 1 MiB limit."""
VECTOR_NORM_TOLERANCE = 1e-4
"""An imported vector whose length is within this of 1 is kept byte for byte (it is what an
export gave); another is scaled to length 1, as an added memory's is."""


# --- models ------------------------------------------------------------------------------------


class SessionIdPage(View):
    """A page of the store's live session ids (in no order); ``next_cursor`` is null on the last
    page. A session live for the whole listing is on some page; one may be on two."""

    session_ids: list[str]
    next_cursor: str | None


class ExportedMessage(View):
    """A message as the session keeps it, with its sequence number."""

    seq: int
    role: Role
    content: str
    name: str | None = None
    created_at: datetime


class SessionExport(View):
    """A session's whole state and a page of its messages (those after ``after_seq``, oldest
    first). Messages up to ``folded_seq`` are in ``summary`` and no longer kept one by one;
    ``read_seq`` is how far extraction has read; ``failures``, ``last_error``, ``last_run_at``
    the outcome of its runs; ``pending`` an extraction answer not all kept yet (JSON, as kept).
    ``next_after_seq`` is the ``after_seq`` of the next page, null on the last."""

    session_id: str
    actor_id: str | None
    summary: str | None
    message_count: int
    created_at: datetime
    last_event_at: datetime
    expires_at: datetime
    read_seq: int
    folded_seq: int
    failures: int
    last_error: str | None
    last_run_at: datetime | None
    pending: str | None
    messages: list[ExportedMessage]
    next_after_seq: int | None


class ImportedMessage(Model):
    """A message to import: an exported one (``ExportedMessage``), checked as an added one is."""

    seq: int = Field(ge=1)
    role: Role
    content: Annotated[str, StringConstraints(min_length=1, max_length=MAX_MESSAGE_CHARS)]
    name: SpeakerName | None = None
    created_at: UtcDatetime = Field(strict=False)


class SessionImport(Model):
    """Body of ``PUT .../import/sessions/{session}``: a ``SessionExport`` (its paging field
    left out) with a page of at most ``MAX_IMPORT_MESSAGES`` messages; send a long session's
    pages one after the other, each with the same state."""

    actor_id: ActorId | None = None
    summary: Annotated[str, StringConstraints(max_length=MAX_SUMMARY_CHARS)] | None = None
    message_count: int = Field(ge=1)
    created_at: UtcDatetime = Field(strict=False)
    last_event_at: UtcDatetime = Field(strict=False)
    expires_at: UtcDatetime = Field(strict=False)
    read_seq: int = Field(0, ge=0)
    folded_seq: int = Field(0, ge=0)
    failures: int = Field(0, ge=0, le=1000)
    last_error: Annotated[str, StringConstraints(max_length=MAX_ERROR_CHARS)] | None = None
    last_run_at: UtcDatetime | None = Field(None, strict=False)
    pending: Annotated[str, StringConstraints(max_length=MAX_PENDING_CHARS)] | None = None
    messages: list[ImportedMessage] = Field(default_factory=list, max_length=MAX_IMPORT_MESSAGES)

    @model_validator(mode="after")
    def _consistent(self) -> SessionImport:
        if not self.folded_seq <= self.read_seq <= self.message_count:
            raise ValueError("needs folded_seq <= read_seq <= message_count")
        if not self.created_at <= self.last_event_at < self.expires_at:
            raise ValueError("needs created_at <= last_event_at < expires_at")
        seqs = [m.seq for m in self.messages]
        if len(set(seqs)) != len(seqs):
            raise ValueError("two messages have the same seq")
        outside = [s for s in seqs if not self.folded_seq < s <= self.message_count]
        if outside:
            raise ValueError(
                f"message seq {outside[0]} is outside folded_seq + 1 to message_count "
                f"({self.folded_seq + 1} to {self.message_count})"
            )
        if self.pending is not None:
            try:
                json.loads(self.pending)
            except ValueError as exc:
                raise ValueError("pending must be JSON (as exported)") from exc
        return self


class SessionImported(View):
    """Answer of a session import: the session's ``message_count`` and ``expires_at`` now, and
    how many of the page's messages it did not have yet (0 when the page was imported before)."""

    session_id: str
    message_count: int
    expires_at: datetime
    messages_added: int


class ExportedSource(View):
    """Where a memory came from (``MemorySource``), as kept."""

    session_id: str
    first_seq: int | None = None
    last_seq: int | None = None
    seqs: list[int] | None = None


class ExportedVersion(View):
    """A memory's state before a change (``MemoryVersion``), as kept."""

    text: str
    type: str
    topics: list[str]
    metadata: dict[str, Any]
    importance: float | None
    changed_at: datetime


class ExportedMemory(View):
    """A memory with every field it keeps: ``MemoryView``'s (current or superseded), its
    ``versions`` and its ``vector``: the float32 values as kept (length 1), little-endian
    bytes in base64 (RFC 4648, section 4)."""

    id: str
    text: str
    type: str
    actor_id: str | None
    topics: list[str]
    metadata: dict[str, Any]
    importance: float | None
    confidence: float | None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime
    source: ExportedSource | None
    versions: list[ExportedVersion]
    occurred_at: datetime | None
    valid_from: datetime
    valid_until: datetime | None
    supersedes: str | None
    superseded_by: str | None
    vector: str


class MemoryExportPage(View):
    """About ``limit`` live memories (an actor's records are read in steps of that size, so a
    page may hold a few more); ``next_cursor`` is null on the last page. A memory kept for the
    whole export is on some page; one may be on two."""

    memories: list[ExportedMemory]
    next_cursor: str | None


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


class ImportedSource(Model):
    session_id: SessionId
    first_seq: int | None = Field(None, ge=1)
    last_seq: int | None = Field(None, ge=1)
    seqs: list[Annotated[int, Field(ge=1)]] | None = Field(None, max_length=1000)


TypeName = Annotated[str, StringConstraints(min_length=1, max_length=40)]


class ImportedVersion(Model):
    text: Annotated[MemoryText, AfterValidator(_not_blank)]
    type: TypeName
    topics: list[Topic] = Field(default_factory=list, max_length=MAX_TOPICS)
    metadata: Metadata = Field(default_factory=dict)
    importance: UnitInterval | None = None
    changed_at: UtcDatetime = Field(strict=False)


class ImportedMemory(Model):
    """A memory to import: an ``ExportedMemory``, checked as an added one is (text, type,
    topics, metadata, importance, confidence; the vector against the store's dimensions), and
    its times and links for consistency. Its ``type`` must be one of the store's types."""

    id: MemoryId
    text: Annotated[MemoryText, AfterValidator(_not_blank)]
    type: TypeName = "semantic"
    actor_id: ActorId | None = None
    topics: list[Topic] = Field(default_factory=list, max_length=MAX_TOPICS)
    metadata: Metadata = Field(default_factory=dict)
    importance: UnitInterval | None = None
    confidence: UnitInterval | None = None
    created_at: UtcDatetime = Field(strict=False)
    updated_at: UtcDatetime = Field(strict=False)
    expires_at: UtcDatetime = Field(strict=False)
    source: ImportedSource | None = None
    versions: list[ImportedVersion] = Field(default_factory=list, max_length=MAX_VERSIONS)
    occurred_at: UtcDatetime | None = Field(None, strict=False)
    valid_from: UtcDatetime | None = Field(None, strict=False)
    valid_until: UtcDatetime | None = Field(None, strict=False)
    supersedes: MemoryId | None = None
    superseded_by: MemoryId | None = None
    vector: Annotated[str, StringConstraints(min_length=1, max_length=44_000)]

    @model_validator(mode="after")
    def _consistent(self) -> ImportedMemory:
        if self.updated_at < self.created_at:
            raise ValueError("needs created_at <= updated_at")
        start = self.valid_from or self.created_at
        if self.valid_until is not None and self.valid_until < start:
            raise ValueError("needs valid_from <= valid_until")
        if (self.valid_until is None) != (self.superseded_by is None):
            raise ValueError("a memory has both valid_until and superseded_by, or neither")
        if self.id in (self.supersedes, self.superseded_by):
            raise ValueError("a memory cannot supersede itself")
        return self


class MemoryImportBatch(Model):
    """Body of ``POST .../import/memories``: 1 to ``MAX_IMPORT_MEMORIES`` memories."""

    memories: list[ImportedMemory] = Field(min_length=1, max_length=MAX_IMPORT_MEMORIES)


class MemoryImportResult(View):
    """Answer of a memory import: how many were written (a memory imported again is written
    again, the same), and the ids left out because their time was up (``expires_at`` passed)."""

    imported: int
    expired: list[str]


# --- sessions ----------------------------------------------------------------------------------

# KEYS: meta, messages. ARGV: after_seq, limit. The session's meta hash (field, value list) and
# its messages after after_seq (at most limit + 1), oldest first, as one consistent read.
_EXPORT_SESSION = (
    READ_ONLY
    + """
return {redis.call('HGETALL', KEYS[1]),
  redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ARGV[1], '+inf', 'LIMIT', 0, tonumber(ARGV[2]) + 1)}
"""
)

# KEYS: meta, messages. ARGV: now, created_at, actor ('' none), message_count, read_seq,
# folded_seq, last_event_at, expires_at, summary ('' none), failures, last_run_at ('' none),
# last_error ('' none), pending ('' none), arm delay ('' when the store has no language model),
# then seq, member pairs. Returns {1, message_count, expires_at, arm_due (0: none), added},
# {-1} when another live session holds the id, {-2, seq} when seq holds another message.
_IMPORT_SESSION = (
    WRITES
    + """
local meta, messages = KEYS[1], KEYS[2]
local now = tonumber(ARGV[1])
local expiry = redis.call('HGET', meta, 'expires_at')
if expiry and tonumber(expiry) > now and redis.call('HGET', meta, 'seq') then
  if redis.call('HGET', meta, 'created_at') ~= ARGV[2] then return {-1} end
else
  local floor = redis.call('HGET', meta, 'deleted_expires')
  if expiry and tonumber(expiry) > now then floor = expiry end
  redis.call('DEL', meta, messages)
  if floor and tonumber(ARGV[8]) <= tonumber(floor) then
    ARGV[8] = string.format('%d', tonumber(floor) + 1)
  end
end
for i = 15, #ARGV, 2 do
  local found = redis.call('ZRANGEBYSCORE', messages, ARGV[i], ARGV[i])
  if #found > 0 and found[1] ~= ARGV[i + 1] then return {-2, tonumber(ARGV[i])} end
end
local function grow(field, value)
  local kept = tonumber(redis.call('HGET', meta, field) or '0')
  if tonumber(value) > kept then redis.call('HSET', meta, field, value) end
  return math.max(kept, tonumber(value))
end
local read_before = tonumber(redis.call('HGET', meta, 'read_seq') or '-1')
local folded_before = tonumber(redis.call('HGET', meta, 'folded_seq') or '-1')
redis.call('HSET', meta, 'created_at', ARGV[2])
if ARGV[3] ~= '' then redis.call('HSETNX', meta, 'actor_id', ARGV[3]) end
local seq = grow('seq', ARGV[4])
local read = grow('read_seq', ARGV[5])
local folded = grow('folded_seq', ARGV[6])
grow('last_event_at', ARGV[7])
local expires = grow('expires_at', ARGV[8])
if tonumber(ARGV[6]) >= folded_before then
  if ARGV[9] ~= '' then redis.call('HSET', meta, 'summary', ARGV[9])
  else redis.call('HDEL', meta, 'summary') end
end
if tonumber(ARGV[5]) >= read_before then
  redis.call('HSET', meta, 'failures', ARGV[10])
  for i, field in ipairs({'last_run_at', 'last_error', 'pending'}) do
    if ARGV[10 + i] ~= '' then redis.call('HSET', meta, field, ARGV[10 + i])
    else redis.call('HDEL', meta, field) end
  end
end
local added = 0
for i = 15, #ARGV, 2 do
  if tonumber(ARGV[i]) > folded then
    added = added + redis.call('ZADD', messages, ARGV[i], ARGV[i + 1])
  end
end
redis.call('ZREMRANGEBYSCORE', messages, '-inf', folded)
redis.call('HDEL', meta, 'deleted_expires')
local stamp = string.format('%d', expires)
redis.call('PEXPIREAT', meta, stamp)
if redis.call('EXISTS', messages) == 1 then redis.call('PEXPIREAT', messages, stamp) end
local arm = 0
if ARGV[14] ~= '' and read < seq then
  local armed = redis.call('HGET', meta, 'armed_due')
  if not armed or tonumber(armed) < now - ARM_STALE then
    arm = now + tonumber(ARGV[14])
    redis.call('HSET', meta, 'armed_due', string.format('%d', arm))
  end
end
return {1, seq, stamp, arm, added}
"""
)


@dataclass(frozen=True)
class SessionImportOutcome:
    """What ``SessionTransfer.import_page`` did: its answer, and the time to arm the session's
    extraction schedule for (its messages are not all read and nothing is armed), if any."""

    result: SessionImported
    arm_due: datetime | None


class SessionTransfer:
    """Export and import of one store's sessions. Errors: ``SessionNotFound``, ``Conflict``,
    ``ValidationFailed``, ``DatabaseUnavailable``."""

    def __init__(self, client: redis.Redis, store: StoreConfig, clock: Clock) -> None:
        self._redis = client
        self._store = store
        self._keys = StoreKeys(store.name, store.incarnation)
        self._clock = clock
        self._export = load_script(client, _EXPORT_SESSION)
        self._import = load_script(client, _IMPORT_SESSION.replace("ARM_STALE", str(ARM_STALE_MS)))
        self._touch = load_script(client, TOUCH_INDEXES)

    def ids(self, cursor: str | None, limit: int) -> SessionIdPage:
        """A page of live session ids (``ZSCAN`` of the store's expiry index, about ``limit``
        per page). ``ValidationFailed`` for a cursor that is not one of ours."""
        start = _int_cursor(cursor)
        now_ms = to_ms(self._clock.now())
        with database_errors():
            after, pairs = self._redis.zscan(self._keys.session_expiry, start, count=limit)
        ids = sorted({str(member) for member, score in pairs if float(score) > now_ms})
        return SessionIdPage(session_ids=ids, next_cursor=str(after) if int(after) else None)

    def export(self, session_id: str, after_seq: int, limit: int) -> SessionExport:
        """The session's state and its messages after ``after_seq`` (at most ``limit``, oldest
        first); ``SessionNotFound`` when it is not live."""
        keys = self._keys.session(session_id)
        with database_errors():
            flat, members = self._export(keys=keys.all(), args=[after_seq, limit])
        raw = dict(zip(flat[::2], flat[1::2], strict=True))
        now_ms = to_ms(self._clock.now())
        if "seq" not in raw or int(raw.get("expires_at", 0)) <= now_ms:
            raise SessionNotFound(session_id)
        messages = [_exported_message(str(m)) for m in members[:limit]]
        more = len(members) > limit
        last_run = raw.get("last_run_at")
        return SessionExport(
            session_id=session_id,
            actor_id=raw.get("actor_id") or None,
            summary=raw.get("summary") or None,
            message_count=int(raw["seq"]),
            created_at=from_ms(raw.get("created_at", 0)),
            last_event_at=from_ms(raw.get("last_event_at", 0)),
            expires_at=from_ms(raw["expires_at"]),
            read_seq=int(raw.get("read_seq", 0)),
            folded_seq=int(raw.get("folded_seq", 0)),
            failures=int(raw.get("failures", 0)),
            last_error=raw.get("last_error") or None,
            last_run_at=from_ms(last_run) if last_run else None,
            pending=raw.get("pending") or None,
            messages=messages,
            next_after_seq=messages[-1].seq if more else None,
        )

    def import_page(self, session_id: str, body: SessionImport) -> SessionImportOutcome:
        """Write ``body`` (the session's state and a page of its messages) as session
        ``session_id``, creating it when the store has none of that id; idempotent (see the
        module docstring). ``Conflict`` when another live session holds the id (created at
        another time) or a sequence number holds another message; ``ValidationFailed`` when
        the session's time is up (``expires_at`` passed: nothing to keep)."""
        now = self._clock.now()
        now_ms = to_ms(now)
        if to_ms(body.expires_at) <= now_ms:
            raise ValidationFailed(
                "The session's expires_at has passed: there is nothing left to import.",
                details=[{"field": "expires_at", "problem": "must be in the future"}],
            )
        pairs: list[str | int] = []
        for message in body.messages:
            doc: dict[str, Any] = {"role": message.role, "content": message.content}
            if message.name is not None:
                doc["name"] = message.name
            doc["created_at"] = to_ms(message.created_at)
            pairs += [message.seq, f"{message.seq}:{encode_message(doc)}"]
        model = self._store.llm_provider != "none"
        keys = self._keys.session(session_id)
        args: list[str | int] = [
            now_ms, to_ms(body.created_at), body.actor_id or "", body.message_count,
            body.read_seq, body.folded_seq, to_ms(body.last_event_at), to_ms(body.expires_at),
            body.summary or "", body.failures,
            str(to_ms(body.last_run_at)) if body.last_run_at else "", body.last_error or "",
            body.pending or "", self._store.extraction_delay_seconds * 1000 if model else "",
            *pairs,
        ]  # fmt: skip
        with database_errors():
            reply = self._import(keys=keys.all(), args=args)
        if int(reply[0]) == -1:
            raise Conflict(
                f"Session '{session_id}' of this store is another session (created at another "
                "time); delete it, or import into another store."
            )
        if int(reply[0]) == -2:
            raise Conflict(
                f"Message {int(reply[1])} of session '{session_id}' is another message in this "
                "store; nothing was written."
            )
        _, count, expires, arm, added = (int(v) for v in reply)
        unread = "1" if model and body.read_seq < count else "0"
        with database_errors():
            self._touch(
                keys=self._keys.session_indexes(),
                args=[to_ms(body.last_event_at), TOUCH_PRUNE_BATCH, session_id, expires, unread],
            )
        result = SessionImported(
            session_id=session_id,
            message_count=count,
            expires_at=from_ms(expires),
            messages_added=added,
        )
        return SessionImportOutcome(result, from_ms(arm) if arm else None)


def _exported_message(member: str) -> ExportedMessage:
    seq, _, payload = member.partition(":")
    doc = json.loads(payload)
    return ExportedMessage(
        seq=int(seq),
        role=doc["role"],
        content=doc["content"],
        name=doc.get("name"),
        created_at=from_ms(doc["created_at"]),
    )


def _int_cursor(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit() or len(cursor) > 20:
        raise ValidationFailed(
            "The cursor is not one this API gave.",
            details=[{"field": "cursor", "problem": "give the next_cursor of the page before"}],
        )
    return int(cursor)


# --- memories ----------------------------------------------------------------------------------

# KEYS: the actor's memories, vectors. ARGV: HSCAN cursor, count. {next cursor, ids, records,
# vectors} of one HSCAN step, records and vectors read in the same atomic step.
_EXPORT_MEMORIES = (
    READ_ONLY
    + """
local step = redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', ARGV[2])
local ids, records, vectors = {}, {}, {}
for i = 1, #step[2], 2 do
  ids[#ids + 1] = step[2][i]
  records[#records + 1] = step[2][i + 1]
  vectors[#vectors + 1] = redis.call('HGET', KEYS[2], step[2][i]) or false
end
return {step[1], ids, records, vectors}
"""
)

# KEYS: ActorKeys.all(). ARGV: log_keep, then id, record, vector triples. Keeps each (replacing
# what that id held), bumps the generation and logs the change for each, so warm indexes catch
# up; returns the generation.
_IMPORT_MEMORIES = lua(
    WRITES,
    """
local gen = 0
for i = 2, #ARGV, 3 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 2])
  gen = redis.call('HINCRBY', KEYS[4], 'gen', 1)
  redis.call('ZADD', KEYS[3], gen, string.format('%d', gen) .. ':+:' .. ARGV[i])
end
redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -(tonumber(ARGV[1]) + 1))
return gen
""",
)


class MemoryTransfer:
    """Export and import of one store's memories. Errors: ``ValidationFailed`` (and its
    ``VectorInvalid``), ``StoreNotFound``, ``DatabaseUnavailable``."""

    def __init__(
        self, client: redis.Redis, binary: redis.Redis, store: StoreConfig, clock: Clock
    ) -> None:
        self._redis = client
        self._binary = binary
        self._store = store
        self._keys = StoreKeys(store.name, store.incarnation)
        self._clock = clock
        self._export = load_script(binary, _EXPORT_MEMORIES)
        self._import = load_script(binary, _IMPORT_MEMORIES)
        self._remove = load_script(client, REMOVE)
        self._unindex = load_script(client, UNINDEX)

    def export(self, cursor: str | None, limit: int) -> MemoryExportPage:
        """About ``limit`` live memories from ``cursor`` on (``"<hscan cursor>:<bucket>"``, or
        None for the first page), actor buckets in order; ``ValidationFailed`` for a cursor
        that is not one of ours."""
        step, bucket = 0, None
        if cursor is not None:
            head, sep, bucket = cursor.partition(":")
            if not sep or not bucket:
                raise ValidationFailed(
                    "The cursor is not one this API gave.",
                    details=[{"field": "cursor", "problem": "give the next_cursor of a page"}],
                )
            step = _int_cursor(head)
        with database_errors():
            buckets = sorted(str(b) for b in self._redis.smembers(self._keys.memory_actors))
        if bucket is not None:
            buckets = [b for b in buckets if b >= bucket]
            if not buckets or buckets[0] != bucket:
                step = 0  # that actor is gone: go on with the next one
        now_ms = to_ms(self._clock.now())
        found: list[ExportedMemory] = []
        while buckets and len(found) < limit:
            actor = self._keys.actor(buckets[0])
            with database_errors():
                after, _, records, vectors = self._export(
                    keys=[actor.memories, actor.vectors], args=[step, limit - len(found)]
                )
            for raw, blob in zip(records, vectors, strict=True):
                record = MemoryRecord.model_validate_json(raw)
                if record.expires_at > now_ms and blob:
                    found.append(_exported_memory(record, cast(bytes, blob)))
            step = int(after)
            if step == 0:
                buckets.pop(0)
        next_cursor = f"{step}:{buckets[0]}" if buckets else None
        return MemoryExportPage(memories=found, next_cursor=next_cursor)

    def import_batch(self, batch: MemoryImportBatch) -> MemoryImportResult:
        """Keep every memory of ``batch`` under its own id, times and links (replacing what
        an id held), with the store-level entries a kept memory has (listing of current
        memories or the superseded index, expiry, owner, actor set). Everything is checked
        before anything is written: ``ValidationFailed`` with ``details`` naming
        ``memories.<i>.<field>`` (a type the store lacks, a vector of another length or
        not finite or all zeros, one that is not base64 float32). Memories whose
        ``expires_at`` has passed are left out and named in ``expired``. ``StoreNotFound`` when
        the store was deleted (or made again) meanwhile: what this call wrote is taken back."""
        types = {*RESERVED_TYPES, *(t.name for t in self._store.custom_types)}
        now_ms = to_ms(self._clock.now())
        problems: list[dict[str, str]] = []
        rows: list[tuple[MemoryRecord, bytes]] = []
        expired: list[str] = []
        allowed = f"must be one of: {', '.join(sorted(types))}"
        for at, memory in enumerate(batch.memories):
            if memory.type not in types:
                problems.append({"field": f"memories.{at}.type", "problem": allowed})
            for v, version in enumerate(memory.versions):
                if version.type not in types:
                    problems.append({"field": f"memories.{at}.versions.{v}.type",
                                     "problem": allowed})  # fmt: skip
            try:
                blob = _vector_bytes(memory.vector, self._store.dimensions)
            except VectorInvalid as exc:
                problem = str(exc.details[0]["problem"]) if exc.details else exc.message
                problems.append({"field": f"memories.{at}.vector", "problem": problem})
                continue
            if to_ms(memory.expires_at) <= now_ms:
                expired.append(memory.id)
                continue
            rows.append((_record(memory), blob))
        if problems:
            raise ValidationFailed("Some memories are not valid; see details.", details=problems)
        if not rows:
            return MemoryImportResult(imported=0, expired=expired)
        by_bucket: dict[str, list[tuple[MemoryRecord, bytes]]] = {}
        for record, blob in rows:
            by_bucket.setdefault(actor_bucket(record.actor_id), []).append((record, blob))
        with database_errors():
            self._index(rows)
            for bucket, items in by_bucket.items():
                args: list[str | bytes | int] = [LOG_KEEP]
                for record, blob in items:
                    args += [record.id, encode_record(record), blob]
                self._import(keys=self._keys.actor(bucket).all(), args=args)
            raw = self._redis.hget(StoreKeys.registry, self._store.name)
        entry = current_entry(raw, self._store)
        if entry is None or (entry.get("dimensions"), entry.get("embed_model")) != (
            self._store.dimensions,
            self._store.embed_model,
        ):
            self._take_back(by_bucket)
            raise StoreNotFound(self._store.name)
        return MemoryImportResult(imported=len(rows), expired=expired)

    def _index(self, rows: Sequence[tuple[MemoryRecord, bytes]]) -> None:
        """The store-level entries of ``rows`` (one slot, one pipeline: setting entries, so
        sent again after a timeout it changes nothing)."""
        keys = self._keys
        pipe = self._redis.pipeline(transaction=False)
        current = {r.id: r.created_at for r, _ in rows if r.valid_until is None}
        closed = {r.id: r.expires_at for r, _ in rows if r.valid_until is not None}
        if current:
            pipe.zadd(keys.memories, current)
            pipe.zrem(keys.memories_superseded, *current)
        if closed:
            pipe.zrem(keys.memories, *closed)
            pipe.zadd(keys.memories_superseded, closed)
        pipe.zadd(keys.memory_expiry, {r.id: r.expires_at for r, _ in rows})
        pipe.hset(keys.memory_owners, mapping={r.id: actor_bucket(r.actor_id) for r, _ in rows})
        pipe.sadd(keys.memory_actors, *{actor_bucket(r.actor_id) for r, _ in rows})
        pipe.execute()

    def _take_back(self, by_bucket: dict[str, list[tuple[MemoryRecord, bytes]]]) -> None:
        keys = self._keys
        with database_errors():
            for bucket, items in by_bucket.items():
                ids = [r.id for r, _ in items]
                self._remove(keys=self._keys.actor(bucket).all(), args=[LOG_KEEP, *ids])
                self._unindex(
                    keys=[keys.memories, keys.memory_expiry, keys.memory_owners,
                          keys.memories_superseded],
                    args=ids,
                )  # fmt: skip


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
