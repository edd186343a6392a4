"""Working memory: sessions of messages with sequence numbers, TTLs and listings.

Concurrency: every append is one Lua script on the session's slot. It takes the next sequence
numbers with HINCRBY and writes the messages in the same atomic step, so concurrent writers can
neither lose, duplicate nor reorder messages (each writer's messages keep its own order, and the
sequence is a total order of the session). Listings read store-level indexes that are updated
right after, in the store's slot.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import redis

from agent_memory.clock import Clock, from_ms, to_ms
from agent_memory.database.client import database_errors, unless_writes_refused
from agent_memory.database.scripts import FINISHES_WRITE, READ_ONLY, WRITES, load_script
from agent_memory.errors import ActorMismatch, PayloadTooLarge, SessionNotFound
from agent_memory.models import MAX_EVENTS_PER_CALL
from agent_memory.sessions.models import (
    EventsRequest,
    EventsResult,
    ExtractionStatus,
    Message,
    SessionList,
    SessionSummary,
    SessionView,
)
from agent_memory.stores.models import StoreConfig

# KEYS: meta, messages. ARGV: actor ('' for none), now_ms, expires_ms, arm delay in ms ('' when
# the store has no language model), summarize_after ('' likewise), payload...
# Returns {last_seq, owner, expires_ms, arm_due_ms, fold}; last_seq 0 means the session belongs
# to another actor. arm_due_ms is non-zero when this append is the first of a quiet period (no
# schedule armed, or one reserved more than ARM_STALE ms before its due time passed: the
# function that reserved it died before arming it, since a schedule fires within a minute and a
# run re-arms or clears it): the caller arms one for that time. New messages also give a
# session whose extraction failed EXTRACTION_MAX_FAILURES times in a row a fresh start. fold is
# 1 when the session now holds more than summarize_after verbatim messages and no summarization
# was asked for yet (one asked for more than FOLD_REQUEST_STALE_MS ago counts as lost).
# A session's expiry only ever grows, across deletes too (a deleted session leaves its last
# expiry in `deleted_expires`), so every append of one session id has a distinct expiry: the
# index scripts below tell appends apart by it.
_APPEND = (
    WRITES
    + """
local meta, messages = KEYS[1], KEYS[2]
local actor, now, expires = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local old_expiry = redis.call('HGET', meta, 'expires_at')
if old_expiry and tonumber(old_expiry) <= now then
  redis.call('DEL', meta, messages)
  old_expiry = false
end
if not old_expiry then
  -- A new session, maybe on the tombstone of a deleted one: nothing of an earlier life stays.
  redis.call('HDEL', meta, 'seq', 'created_at', 'actor_id', 'summary', 'read_seq',
    'folded_seq', 'pending', 'armed_due', 'fold_requested', 'requested_at', 'failures',
    'last_run_at', 'last_error')
end
local floor = old_expiry or redis.call('HGET', meta, 'deleted_expires')
if floor and expires <= tonumber(floor) then expires = tonumber(floor) + 1 end
local owner = redis.call('HGET', meta, 'actor_id')
if actor ~= '' then
  if owner and owner ~= actor then return {0, owner, 0, 0, 0} end
  if not owner then
    redis.call('HSET', meta, 'actor_id', actor)
    owner = actor
  end
end
local n = #ARGV - 5
local last = redis.call('HINCRBY', meta, 'seq', n)
for i = 1, n do
  local seq = last - n + i
  redis.call('ZADD', messages, seq, string.format('%d', seq) .. ':' .. ARGV[5 + i])
end
local stamp = string.format('%d', expires)
redis.call('HDEL', meta, 'deleted_expires')
redis.call('HSETNX', meta, 'created_at', ARGV[2])
redis.call('HSET', meta, 'last_event_at', ARGV[2], 'expires_at', stamp)
local arm = 0
if ARGV[4] ~= '' then
  local armed = redis.call('HGET', meta, 'armed_due')
  if not armed or tonumber(armed) < now - ARM_STALE then
    arm = now + tonumber(ARGV[4])
    redis.call('HSET', meta, 'armed_due', string.format('%d', arm))
  end
  if tonumber(redis.call('HGET', meta, 'failures') or '0') >= MAX_FAILURES then
    redis.call('HSET', meta, 'failures', '0')
  end
end
local fold = 0
if ARGV[5] ~= '' then
  local verbatim = last - tonumber(redis.call('HGET', meta, 'folded_seq') or '0')
  local asked = redis.call('HGET', meta, 'fold_requested')
  if verbatim > tonumber(ARGV[5]) and (not asked or tonumber(asked) < now - FOLD_STALE) then
    redis.call('HSET', meta, 'fold_requested', ARGV[2])
    fold = 1
  end
end
redis.call('PEXPIREAT', meta, stamp)
redis.call('PEXPIREAT', messages, stamp)
return {last, owner or '', stamp, arm, fold}
"""
)

# The store's three indexes (one slot): sessions (by recency), sessions:expiry and
# sessions:deleted (tombstones: a deleted session's last expiry). Every script on them first
# drops up to ARGV[2] expired ids and the tombstones that have run out. ARGV[1] is now (ms).
# A listing prunes on its way unless the database refuses writes (full, or a replica): then it
# lists without pruning (it skips expired ids anyway).
_PRUNE_LUA = """
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, id in ipairs(expired) do
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', ARGV[1])
"""
_PRUNE = WRITES + _PRUNE_LUA + "return #expired\n"

# After an append: record the session's activity (ARGV[3] id, ARGV[4] its new expiry), unless
# a delete already covered that append (tombstone at or after this expiry). GT keeps a late
# touch of an older append from moving the session back in time. ARGV[5] '1': the session now
# has messages extraction has not read (the store has a language model). It completes the append,
# so it runs even when that append filled the database (FINISHES_WRITE).
_TOUCH = (
    FINISHES_WRITE
    + _PRUNE_LUA
    + """
local tomb = redis.call('ZSCORE', KEYS[3], ARGV[3])
if tomb and tonumber(tomb) >= tonumber(ARGV[4]) then return #expired end
redis.call('ZADD', KEYS[1], 'GT', ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[2], 'GT', ARGV[4], ARGV[3])
if ARGV[5] == '1' then redis.call('ZADD', KEYS[4], 'GT', ARGV[4], ARGV[3]) end
if tomb then redis.call('ZREM', KEYS[3], ARGV[3]) end
return #expired
"""
)

TOUCH_INDEXES = _TOUCH
"""The store-index step after a write of a session's messages, for the other writers of
sessions (``transfer``): KEYS ``StoreKeys.session_indexes()``; ARGV last event (ms), prune
batch, session id, its expiry (ms), ``'1'`` when it has unread messages."""

# After a delete of a session whose expiry was ARGV[4]: drop it from the indexes unless a
# newer incarnation of the session was indexed meanwhile, and leave a tombstone so that a
# touch of an append the delete removed cannot bring the entry back. It completes the delete.
_FORGET = (
    FINISHES_WRITE
    + _PRUNE_LUA
    + """
local score = redis.call('ZSCORE', KEYS[2], ARGV[3])
if score and tonumber(score) <= tonumber(ARGV[4]) then
  redis.call('ZREM', KEYS[1], ARGV[3])
  redis.call('ZREM', KEYS[2], ARGV[3])
end
local unread = redis.call('ZSCORE', KEYS[4], ARGV[3])
if unread and tonumber(unread) <= tonumber(ARGV[4]) then redis.call('ZREM', KEYS[4], ARGV[3]) end
redis.call('ZADD', KEYS[3], 'GT', ARGV[4], ARGV[3])
return #expired
"""
)

# KEYS: meta, messages. Deletes both, keeping the expiry the session had as `deleted_expires`
# in a meta hash that lives until then (the floor for the next append's expiry); returns it.
_DELETE = (
    WRITES
    + """
local expires = redis.call('HGET', KEYS[1], 'expires_at')
if not expires then return '' end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[1], 'deleted_expires', expires)
redis.call('PEXPIREAT', KEYS[1], expires)
return expires
"""
)
# KEYS: meta. ARGV: field, value ('' = any). Deletes the field if it holds the value. It takes
# back a reservation of an append already made (FINISHES_WRITE).
_RELEASE = (
    FINISHES_WRITE
    + """
local held = redis.call('HGET', KEYS[1], ARGV[1])
if held and (ARGV[2] == '' or held == ARGV[2]) then redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0
"""
)
# KEYS: meta, messages, lock. ARGV: recent. A session as one consistent read (an append between
# the metadata and the messages would show a count the messages disagree with): {the meta hash
# as a field, value list, its newest `recent` messages oldest first, 1 when a run holds the lock}.
_READ = (
    READ_ONLY
    + """
return {redis.call('HGETALL', KEYS[1]), redis.call('ZRANGE', KEYS[2], -tonumber(ARGV[1]), -1),
  redis.call('EXISTS', KEYS[3])}
"""
)
FOLD_REQUEST_STALE_MS = 600_000
"""A summarization asked for this long ago (ms) without finishing is asked for again."""
ARM_STALE_MS = 900_000
"""A reserved schedule whose due time passed this long ago (ms) counts as never armed."""
EXTRACTION_MAX_FAILURES = 5
"""After this many failed runs in a row a session's extraction shows ``failed`` and is not
retried until new messages arrive (which give it a fresh start)."""
_APPEND = (
    _APPEND.replace("FOLD_STALE", str(FOLD_REQUEST_STALE_MS))
    .replace("ARM_STALE", str(ARM_STALE_MS))
    .replace("MAX_FAILURES", str(EXTRACTION_MAX_FAILURES))
)
PRUNE_BATCH = 1000
TOUCH_PRUNE_BATCH = 100

_META_FIELDS = (
    "actor_id", "seq", "created_at", "last_event_at", "expires_at",
    # extraction status (SessionMeta.extraction)
    "read_seq", "armed_due", "failures", "last_run_at", "last_error",
)  # fmt: skip
"""The meta fields a listing reads: what ``SessionSummary`` shows. Not ``summary``, which the
listing does not show and which may hold 8,000 characters a session (``GET`` of one session
reads it): with it, listing 200 such sessions read 1.6 MB from the database."""


@dataclass(frozen=True)
class Appended:
    """What an append did, for the caller that schedules background work: ``arm_due`` is the
    time to arm the session's extraction schedule for (this append began a quiet period), and
    ``fold`` asks for summarization now (the session outgrew ``summarize_after``)."""

    result: EventsResult
    arm_due: datetime | None
    fold: bool


def encode_message(event: dict[str, Any]) -> str:
    """A message's stored JSON (``role``, ``content``, ``name``?, ``created_at`` in ms), the
    part of a ``messages`` member after ``<seq>:``."""
    # ensure_ascii=False keeps text byte for byte as UTF-8 (emoji, ZWJ sequences, CJK).
    return json.dumps(event, ensure_ascii=False, separators=(",", ":"))


def decode_member(member: str) -> Message:
    """A message from its stored form ``<seq>:<json>``."""
    seq, _, payload = member.partition(":")
    doc = json.loads(payload)
    return Message(
        seq=int(seq),
        role=doc["role"],
        content=doc["content"],
        name=doc.get("name"),
        created_at=from_ms(doc["created_at"]),
    )


def live_meta(session_id: str, raw: Mapping[str, str], now_ms: int) -> SessionMeta | None:
    """The metadata of a live session from its meta hash ``raw`` (``HGETALL`` or the fields
    of ``_META_FIELDS``), or None when there is none: absent, deleted (only a tombstone with
    ``deleted_expires`` is left) or expired (``expires_at`` at or before ``now_ms``)."""
    if "seq" not in raw or int(raw.get("expires_at", 0)) <= now_ms:
        return None
    return SessionMeta(session_id, dict(raw))


class SessionMeta:
    """A session's metadata hash, decoded. ``None`` fields were never written."""

    def __init__(self, session_id: str, raw: dict[str, str]) -> None:
        self.session_id = session_id
        self.running = False
        self.actor_id = raw.get("actor_id") or None
        self.message_count = int(raw.get("seq", 0))
        self.created_at = from_ms(raw.get("created_at", 0))
        self.last_event_at = from_ms(raw.get("last_event_at", 0))
        self.expires_at = from_ms(raw.get("expires_at", 0))
        self.summary = raw.get("summary") or None
        self.read_seq = int(raw.get("read_seq", 0))
        self.folded_seq = int(raw.get("folded_seq", 0))
        armed = raw.get("armed_due")
        self.armed_due = from_ms(armed) if armed else None
        self.failures = int(raw.get("failures", 0))
        last_run = raw.get("last_run_at")
        self.last_run_at = from_ms(last_run) if last_run else None
        self.last_error = raw.get("last_error") or None
        self.requested = bool(raw.get("requested_at"))
        self.life = raw.get("created_at", "")
        """The raw ``created_at``: which life of the session id this is (background runs
        change the session only while it is the same one)."""

    @property
    def unread(self) -> int:
        """Messages extraction has not read yet."""
        return self.message_count - self.read_seq

    def extraction(self, *, running: bool, has_model: bool) -> ExtractionStatus:
        """The session's extraction status (``SessionView.extraction``)."""
        if running:
            status = "running"
        elif self.failures >= EXTRACTION_MAX_FAILURES:
            status = "failed"
        elif has_model and (self.unread > 0 or self.armed_due is not None):
            status = "waiting"
        else:
            status = "idle"
        return ExtractionStatus(
            status=status,
            due_at=self.armed_due,
            last_run_at=self.last_run_at,
            last_error=self.last_error,
            unread=self.unread,
        )

    def summary_view(self, *, has_model: bool) -> SessionSummary:
        """The session as a listing shows it (``running`` as set by the reader)."""
        return SessionSummary(
            session_id=self.session_id,
            actor_id=self.actor_id,
            message_count=self.message_count,
            created_at=self.created_at,
            last_event_at=self.last_event_at,
            expires_at=self.expires_at,
            extraction=self.extraction(running=self.running, has_model=has_model),
        )


class Sessions:
    """The sessions of one store. Errors: ``SessionNotFound``, ``ActorMismatch``,
    ``PayloadTooLarge``, ``DatabaseUnavailable``."""

    def __init__(self, client: redis.Redis, store: StoreConfig, clock: Clock) -> None:
        self._redis = client
        self._store = store
        self._keys = store.keys()
        self._clock = clock
        self._append = load_script(client, _APPEND)
        self._prune = load_script(client, _PRUNE)
        self._touch = load_script(client, _TOUCH)
        self._forget = load_script(client, _FORGET)
        self._delete = load_script(client, _DELETE)
        self._release = load_script(client, _RELEASE)
        self._read_script = load_script(client, _READ)

    @property
    def has_model(self) -> bool:
        """Whether the store has a language model (and so extracts and summarizes)."""
        return self._store.llm_provider != "none"

    def append(self, session_id: str, request: EventsRequest) -> EventsResult:
        """Add ``request.events`` to the session, creating it on first use.

        Each message is stamped with the next sequence number; ``created_at`` defaults to now.
        The session's expiry moves to now + ``session_ttl_seconds``. Raises ``PayloadTooLarge``
        above ``MAX_EVENTS_PER_CALL`` events and ``ActorMismatch`` when the session belongs to
        another actor; in both cases nothing is written.
        """
        return self.append_events(session_id, request).result

    def append_events(self, session_id: str, request: EventsRequest) -> Appended:
        """``append``, also saying what background work the append calls for (``Appended``):
        with a language model, the first append of a quiet period reserves the session's
        extraction schedule (``armed_due``) in the same atomic step, so concurrent appends arm
        it once; a session outgrowing ``summarize_after`` asks for summarization once."""
        if len(request.events) > MAX_EVENTS_PER_CALL:
            raise PayloadTooLarge(
                f"{len(request.events)} events in one call; send at most {MAX_EVENTS_PER_CALL}."
            )
        now = self._clock.now()
        now_ms = to_ms(now)
        expires_ms = to_ms(now + timedelta(seconds=self._store.session_ttl_seconds))
        payloads = []
        for event in request.events:
            doc: dict[str, Any] = {"role": event.role, "content": event.content}
            if event.name is not None:
                doc["name"] = event.name
            doc["created_at"] = to_ms(event.created_at) if event.created_at else now_ms
            payloads.append(encode_message(doc))
        keys = self._keys.session(session_id)
        model = self.has_model
        delay_ms = self._store.extraction_delay_seconds * 1000 if model else ""
        fold_after = self._store.summarize_after if model else ""
        with database_errors():
            last, owner, expires_ms, arm_ms, fold = self._append(
                keys=[keys.meta, keys.messages],
                args=[request.actor_id or "", now_ms, expires_ms, delay_ms, fold_after, *payloads],
            )
            if int(last) == 0:
                raise ActorMismatch(session_id, str(owner), request.actor_id or "")
            # The store's indexes (another slot), pruned of a few expired ids on the way so that
            # a store whose sessions are never listed does not keep every id it ever had.
            self._touch(
                keys=self._keys.session_indexes(),
                args=[now_ms, TOUCH_PRUNE_BATCH, session_id, expires_ms, "1" if model else "0"],
            )
        result = EventsResult(session_id=session_id, added=len(payloads), message_count=int(last))
        arm_due = from_ms(int(arm_ms)) if int(arm_ms) else None
        return Appended(result, arm_due, int(fold) == 1)

    def _read(self, session_id: str, recent: int) -> tuple[SessionMeta, list[Message]] | None:
        keys = self._keys.session(session_id)
        with database_errors():
            flat, members, locked = self._read_script(
                keys=[keys.meta, keys.messages, keys.lock], args=[recent]
            )
        raw = dict(zip(flat[::2], flat[1::2], strict=True))
        meta = live_meta(session_id, raw, to_ms(self._clock.now()))
        if meta is None:
            return None
        meta.running = bool(locked)
        return meta, [decode_member(m) for m in members]

    def get(self, session_id: str, recent: int) -> SessionView:
        """The session with its newest ``recent`` messages, oldest first; ``SessionNotFound``."""
        found = self._read(session_id, recent)
        if found is None:
            raise SessionNotFound(session_id)
        meta, messages = found
        return SessionView(
            session_id=session_id,
            actor_id=meta.actor_id,
            summary=meta.summary,
            messages=messages,
            message_count=meta.message_count,
            created_at=meta.created_at,
            last_event_at=meta.last_event_at,
            expires_at=meta.expires_at,
            extraction=meta.extraction(running=meta.running, has_model=self.has_model),
        )

    def working_memory(
        self, session_id: str, recent: int
    ) -> tuple[SessionMeta | None, list[Message]]:
        """For recall: the session's metadata and newest ``recent`` messages, or ``(None, [])``
        for a session that does not exist yet (not an error)."""
        found = self._read(session_id, recent)
        return found if found is not None else (None, [])

    def delete(self, session_id: str) -> None:
        """Forget the session's working memory; ``SessionNotFound`` if there is none.

        Two steps on two slots: delete the session's keys (reading the expiry they had), then
        drop it from the store's indexes with a tombstone. See ``_FORGET`` for why an append
        racing the delete leaves listings, counts and reads in agreement either way.
        """
        keys = self._keys.session(session_id)
        now_ms = to_ms(self._clock.now())
        with database_errors():
            expires = str(self._delete(keys=keys.all()))
            if expires:
                self._forget(
                    keys=self._keys.session_indexes(),
                    args=[now_ms, TOUCH_PRUNE_BATCH, session_id, expires],
                )
        if not expires or int(expires) <= now_ms:
            raise SessionNotFound(session_id)

    def _prune_expired(self) -> None:
        """Drop expired ids from the store's indexes, unless the database refuses writes."""
        now_ms = to_ms(self._clock.now())
        keys = self._keys.session_indexes()
        with unless_writes_refused():
            while int(self._prune(keys=keys, args=[now_ms, PRUNE_BATCH])) == PRUNE_BATCH:
                pass

    def list(self, offset: int, limit: int) -> SessionList:
        """A page of live sessions, most recent first, each with its extraction status;
        ``next_offset`` is null on the last page. Expired ids are pruned on the way, or only
        skipped while the database refuses writes."""
        self._prune_expired()
        with database_errors():
            ids = [
                str(i) for i in self._redis.zrevrange(self._keys.sessions, offset, offset + limit)
            ]
            pipe = self._redis.pipeline(transaction=False)
            for session_id in ids[:limit]:
                keys = self._keys.session(session_id)
                pipe.hmget(keys.meta, _META_FIELDS)
                pipe.exists(keys.lock)
            rows = pipe.execute()
        now_ms = to_ms(self._clock.now())
        sessions = []
        for session_id, values, locked in zip(ids[:limit], rows[::2], rows[1::2], strict=True):
            raw = {k: v for k, v in zip(_META_FIELDS, values, strict=True) if v is not None}
            meta = live_meta(session_id, raw, now_ms)
            if meta is not None:
                meta.running = bool(locked)
                sessions.append(meta.summary_view(has_model=self.has_model))
        return SessionList(
            sessions=sessions, next_offset=offset + limit if len(ids) > limit else None
        )

    def release(self, session_id: str, field: str, value: str | None = None) -> None:
        """Forget a reservation an append made (``armed_due``, ``fold_requested``) because
        the background work it was for could not be scheduled; with ``value``, only if the
        field still holds it. The next append makes it again."""
        keys = self._keys.session(session_id)
        with database_errors():
            self._release(keys=[keys.meta], args=[field, value or ""])

    def waiting_for_extraction(self) -> int:
        """Live sessions with messages extraction has not read (``counts``)."""
        now_ms = to_ms(self._clock.now())
        with database_errors():
            return int(self._redis.zcount(self._keys.unread_sessions, f"({now_ms}", "+inf"))

    def extraction_record(self) -> tuple[datetime | None, str | None]:
        """The store's ``last_extraction_at`` and ``last_extraction_error`` (the error of the
        latest failed run, cleared by the next run that succeeds)."""
        with database_errors():
            at, error = self._redis.hmget(
                self._keys.extraction, ["last_extraction_at", "last_extraction_error"]
            )
        return (from_ms(int(at)) if at else None), (str(error) if error else None)

    def count(self) -> int:
        """Exact number of live sessions (expired ones are not counted, pruned or not)."""
        with database_errors():
            return int(
                self._redis.zcount(
                    self._keys.session_expiry, f"({to_ms(self._clock.now())}", "+inf"
                )
            )
