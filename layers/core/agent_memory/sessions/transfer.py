"""Export and import of a store's sessions, losslessly, for moving a store to another database
(``tools/transfer.py`` over the public API; docs/routes.md, "Export and import"). Its sibling
``memory_transfer`` moves the store's memories; the two share nothing but the cursor check
(``int_cursor``, here) and the rules below.

Export reads what is kept as it is kept: a session's whole state (its messages with their
sequence numbers, summary, extraction cursor and outcome). Import writes that state back under
the same ids, sequence numbers and times. Both are paged:

- ``SessionTransfer.ids`` pages the store's live session ids (ZSCAN of the expiry index: a
  session live for the whole listing is listed at least once; the tool drops repeats);
  ``export`` pages one session's messages by sequence number; ``import_page`` writes one page.

Import is idempotent: a session page written twice is kept once (a message is its sequence
number and content), and it never moves a session back (a counter or cursor only grows; a
summary, a pending answer and the extraction outcome are taken only from a state at least as
far as the one kept). It refuses (409) a session id that another session holds in the target
store, or a sequence number that holds another message there. Nothing is re-derived.

Keys: the same as the routes that write (``keys.py``); every script touches one slot, the
session's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

import redis
from pydantic import Field, StringConstraints, model_validator

from agent_memory.clock import Clock, from_ms, to_ms
from agent_memory.database.client import database_errors
from agent_memory.database.scripts import READ_ONLY, WRITES, load_script
from agent_memory.errors import ActorMismatch, Conflict, SessionNotFound, ValidationFailed
from agent_memory.models import MAX_MESSAGE_CHARS, MAX_RECENT, ActorId, Model, UtcDatetime, View
from agent_memory.sessions.models import Role, SpeakerName
from agent_memory.sessions.service import (
    ARM_STALE_MS,
    TOUCH_INDEXES,
    TOUCH_PRUNE_BATCH,
    encode_message,
)
from agent_memory.stores.models import (
    IMPORT_CLOCK_SKEW_SECONDS,
    MAX_SESSION_TTL_SECONDS,
    StoreConfig,
)

MAX_EXPORT_MESSAGES = MAX_RECENT
"""Messages per session export page (1,000)."""
MAX_IMPORT_MESSAGES = 200
"""Messages per session import call: 200 of the longest (32,000 characters) are over the 1 MiB
body limit anyway, and the bound keeps the body of any one refused field under it, so that
a body that breaks it is a 422 naming the field, not a 413."""
MAX_SEQ = 10**15
"""The largest sequence number (and so ``message_count``, ``read_seq``, ``folded_seq``) an
import takes. The scripts hold a sequence number as a Lua number (a double) and as a sorted-set
score, exact up to 2**53 (about 9.007e15): this leaves room for the appends after it. A larger
one was kept as given, answered as -9223372036854775808, and made the session's next append a
500 (``HINCRBY`` of a count out of range)."""
MAX_SUMMARY_CHARS = 8_000
MAX_ERROR_CHARS = 2_000
MAX_PENDING_CHARS = 256_000
"""A pending extraction answer (the model's memories not all kept yet), as the session keeps
it: JSON of at most ``prompts.MAX_MEMORIES_PER_RUN`` (50) items of at most
``prompts.MAX_MEMORY_CHARS`` (2,000) characters of text and their topics, about 150,000
characters at most; the bound keeps a body that passes it well under the 1 MiB limit."""


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

    seq: int = Field(ge=1, le=MAX_SEQ)
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
    message_count: int = Field(ge=1, le=MAX_SEQ)
    created_at: UtcDatetime = Field(strict=False)
    last_event_at: UtcDatetime = Field(strict=False)
    expires_at: UtcDatetime = Field(strict=False)
    read_seq: int = Field(0, ge=0, le=MAX_SEQ)
    folded_seq: int = Field(0, ge=0, le=MAX_SEQ)
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
# {-1} when another live session holds the id, {-2, seq} when seq holds another message,
# {-3, actor} when the live session belongs to another actor.
_IMPORT_SESSION = (
    WRITES
    + """
local meta, messages = KEYS[1], KEYS[2]
local now = tonumber(ARGV[1])
local expiry = redis.call('HGET', meta, 'expires_at')
if expiry and tonumber(expiry) > now and redis.call('HGET', meta, 'seq') then
  if redis.call('HGET', meta, 'created_at') ~= ARGV[2] then return {-1} end
  local held = redis.call('HGET', meta, 'actor_id')
  if ARGV[3] ~= '' and held and held ~= ARGV[3] then return {-3, held} end
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
        self._keys = store.keys()
        self._clock = clock
        self._export = load_script(client, _EXPORT_SESSION)
        self._import = load_script(client, _IMPORT_SESSION.replace("ARM_STALE", str(ARM_STALE_MS)))
        self._touch = load_script(client, TOUCH_INDEXES)

    def ids(self, cursor: str | None, limit: int) -> SessionIdPage:
        """A page of live session ids (``ZSCAN`` of the store's expiry index, about ``limit``
        per page). ``ValidationFailed`` for a cursor that is not one of ours."""
        start = int_cursor(cursor)
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
        another time) or a sequence number holds another message, ``ActorMismatch`` (409
        ``actor_mismatch``) when the live session belongs to another actor;
        ``ValidationFailed`` when the session's time is up (``expires_at`` passed: nothing to
        keep) or is further than any store keeps a session (now plus the largest
        ``session_ttl_seconds`` and a day: later would keep it for ever)."""
        now = self._clock.now()
        now_ms = to_ms(now)
        if to_ms(body.expires_at) <= now_ms:
            raise ValidationFailed(
                "The session's expires_at has passed: there is nothing left to import.",
                details=[{"field": "expires_at", "problem": "must be in the future"}],
            )
        latest = now_ms + (MAX_SESSION_TTL_SECONDS + IMPORT_CLOCK_SKEW_SECONDS) * 1000
        if to_ms(body.expires_at) > latest:
            raise ValidationFailed(
                "The session's expires_at is further away than any store keeps a session.",
                details=[{"field": "expires_at", "problem": f"must be at most "
                          f"{MAX_SESSION_TTL_SECONDS} s (the largest session_ttl_seconds) "
                          "and a day from now"}],
            )  # fmt: skip
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
        if int(reply[0]) == -3:  # as an append of another actor's messages is refused
            held = reply[1].decode() if isinstance(reply[1], bytes) else str(reply[1])
            raise ActorMismatch(session_id, held, body.actor_id or "")
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


def int_cursor(cursor: str | None) -> int:
    """The number in a paging cursor this API gave (0 for none; ``memory_transfer`` uses it for
    the HSCAN half of its cursors); ``ValidationFailed`` for any other text."""
    if cursor is None:
        return 0
    if not cursor.isdigit() or len(cursor) > 20:
        raise ValidationFailed(
            "The cursor is not one this API gave.",
            details=[{"field": "cursor", "problem": "give the next_cursor of the page before"}],
        )
    return int(cursor)
