"""Working memory: ``Sessions``, the sessions of one store, with their messages in order,
their TTLs and listings.

Concurrency: every append is one Lua script on the session's slot (``scripts.APPEND``). It takes
the next sequence numbers with HINCRBY and writes the messages in the same atomic step, so
concurrent writers can neither lose, duplicate nor reorder messages (each writer's messages keep
its own order, and the sequence is a total order of the session). Listings read store-level
indexes that are updated right after, in the store's slot (``scripts.TOUCH``). What is stored,
and under which names: ``records``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from redis.client import Pipeline

from agent_memory.answers import DEFAULT_ANSWER_BUDGET, largest_fitting
from agent_memory.clock import from_ms, to_ms
from agent_memory.database.client import database_errors, unless_writes_refused
from agent_memory.database.scripts import load_script, script_then
from agent_memory.errors import (
    ActorMismatch,
    IdempotencyKeyReused,
    PayloadTooLarge,
    SessionBusy,
    SessionNotFound,
)
from agent_memory.models import MAX_EVENTS_PER_CALL
from agent_memory.sessions import scripts
from agent_memory.sessions.models import (
    EventsRequest,
    EventsResult,
    Message,
    PoppedMessage,
    SessionList,
    SessionView,
)
from agent_memory.sessions.records import (
    LIST_FIELDS,
    ExtractionFields,
    SessionMeta,
    decode_member,
    encode_message,
    live_meta,
)
from agent_memory.sessions.window import window_reads, window_start
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.idempotency import OnceKey

PRUNE_BATCH = 1000
TOUCH_PRUNE_BATCH = 100
"""Expired ids a listing prunes from the store's indexes per script call, and an append on its
way (so that a store whose sessions are never listed does not keep every id it ever had)."""


@dataclass(frozen=True)
class Appended:
    """What an append did, for the caller that schedules background work: ``arm_due`` is the
    time to arm the session's extraction schedule for (this append began a quiet period), and
    ``fold`` asks for summarization now (the session outgrew ``summarize_after``)."""

    result: EventsResult
    arm_due: datetime | None
    fold: bool


class Sessions:
    """The sessions of one store. Errors: ``SessionNotFound``, ``ActorMismatch``,
    ``PayloadTooLarge``, ``DatabaseUnavailable``."""

    def __init__(self, db: StoreDatabase) -> None:
        client = db.client
        self._redis = client
        self._check = db.check
        self._store = db.config
        self._keys = db.keys
        self._clock = db.clock
        self._append = load_script(client, scripts.APPEND)
        self._prune = load_script(client, scripts.PRUNE)
        self._touch = load_script(client, scripts.TOUCH)
        self._forget = load_script(client, scripts.FORGET)
        self._delete = load_script(client, scripts.DELETE)
        self._release = load_script(client, scripts.RELEASE)
        self._read_script = load_script(client, scripts.READ)
        self._pop = load_script(client, scripts.POP)

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

    def append_events(
        self, session_id: str, request: EventsRequest, once: OnceKey | None = None
    ) -> Appended:
        """``append``, also saying what background work the append calls for (``Appended``):
        with a language model, the first append of a quiet period reserves the session's
        extraction schedule (``armed_due``) in the same atomic step, so concurrent appends arm
        it once; a session outgrowing ``summarize_after`` asks for summarization once. With
        ``once`` (a keyed write) the append is done once per key: sent again, it writes
        nothing and answers as the first did (``IdempotencyKeyReused`` for another request
        under the key), even when the first one's answer was lost."""
        if len(request.events) > MAX_EVENTS_PER_CALL:
            raise PayloadTooLarge(
                f"{len(request.events)} events in one call; send at most {MAX_EVENTS_PER_CALL}."
            )
        now = self._clock.now()
        now_ms = to_ms(now)
        expires_ms = to_ms(now + timedelta(seconds=self._store.session_ttl_seconds))
        payloads = [
            encode_message(
                event.role,
                event.text,
                event.name,
                to_ms(event.created_at) if event.created_at else now_ms,
                event.item,
            )
            for event in request.events
        ]
        keys = self._keys.session(session_id)
        model = self.has_model
        delay_ms = self._store.extraction_delay_seconds * 1000 if model else ""
        fold_after = self._store.summarize_after if model else ""
        script_keys = [keys.meta, keys.messages]
        if once is not None:
            script_keys.append(keys.once(once.digest))
        fingerprint = once.fingerprint if once is not None else ""
        with database_errors():
            last, owner, expires_ms, arm_ms, fold = self._append(
                keys=script_keys,
                args=[
                    request.actor_id or "",
                    now_ms,
                    expires_ms,
                    delay_ms,
                    fold_after,
                    fingerprint,
                    *payloads,
                ],
            )
            if int(last) < 0:
                raise IdempotencyKeyReused()
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

    def _read(
        self,
        session_id: str,
        recent: int,
        before_seq: int | None = None,
        reads: Callable[[Pipeline], object] | None = None,
    ) -> tuple[tuple[SessionMeta, list[Message]] | None, list[Any]]:
        """The session's metadata and newest messages (``scripts.READ``), or None; and the
        replies of the read commands ``reads`` queues, sent in the same round trip ([] without
        ``reads``)."""
        keys = self._keys.session(session_id)
        before = "" if before_seq is None else str(before_seq)
        script_keys = [keys.meta, keys.messages, keys.lock]
        args: list[str | int] = [recent, before]
        others: list[Any] = []
        check = self._check
        checked = False

        def reads_and_check(pipe: Pipeline) -> None:
            # The store's registry entry, while its settings are not confirmed, in the same
            # round trip (stores.freshness); its reply is the last.
            nonlocal checked
            if reads is not None:
                reads(pipe)
            checked = check.queue(pipe)

        with database_errors():
            if reads is None and not check.pending:
                flat, members, locked = self._read_script(keys=script_keys, args=args)
            else:
                found, *others = script_then(
                    self._redis, self._read_script, script_keys, args, reads_and_check
                )
                flat, members, locked = found
        if checked:
            check.confirm(others.pop())
        raw = dict(zip(flat[::2], flat[1::2], strict=True))
        meta = live_meta(session_id, raw, to_ms(self._clock.now()), running=bool(locked))
        if meta is None:
            return None, others
        return (meta, [decode_member(m) for m in members]), others

    def get(
        self,
        session_id: str,
        recent: int,
        before_seq: int | None = None,
        budget: int = DEFAULT_ANSWER_BUDGET,
    ) -> SessionView:
        """The session with its newest ``recent`` messages (of those before ``before_seq``,
        when given), oldest first; ``SessionNotFound``. The answer is kept under ``budget``
        bytes (``answers.wire_bytes``): the oldest of those messages are left out as needed,
        and ``messages_omitted`` says how many (``before_seq`` set to the first one shown
        reads them)."""
        found, _ = self._read(session_id, recent, before_seq)
        if found is None:
            raise SessionNotFound(session_id)
        meta, messages = found
        extraction = meta.extraction(running=meta.running, has_model=self.has_model)

        def build(kept: int) -> SessionView:
            return SessionView(
                session_id=session_id,
                actor_id=meta.actor_id,
                summary=meta.summary,
                messages=messages[len(messages) - kept :],
                message_count=meta.message_count,
                created_at=meta.created_at,
                last_event_at=meta.last_event_at,
                expires_at=meta.expires_at,
                extraction=extraction,
                messages_omitted=len(messages) - kept,
            )

        return largest_fitting(build, len(messages), budget)[0]

    def working_memory(
        self, session_id: str, reads: Callable[[Pipeline], object] | None = None
    ) -> tuple[SessionMeta | None, list[Message], list[Any]]:
        """For recall: the session's metadata and the messages of its window (``window``:
        after the last folded message, moving in jumps, at most ``summarize_after`` unless a
        fold is under way), or ``None, []`` for a session that does not exist yet (not an
        error); then the replies of the read commands of the caller's that ``reads`` queues,
        sent in the same round trip."""
        store, folds = self._store, self.has_model
        most = window_reads(store.summarize_after, store.keep_recent, folds)
        found, replies = self._read(session_id, most, reads=reads)
        if found is None:
            return None, [], replies
        meta, messages = found
        start = window_start(
            meta.message_count, meta.folded_seq, store.summarize_after, store.keep_recent, folds
        )
        return meta, [m for m in messages if m.seq > start], replies

    def owner(self, session_id: str) -> str | None:
        """The actor of a live session (None for one without); ``SessionNotFound``
        otherwise."""
        found, _ = self._read(session_id, 1)  # its newest message too: the script needs one
        if found is None:
            raise SessionNotFound(session_id)
        return found[0].actor_id

    def pop(self, session_id: str, once: OnceKey | None = None) -> PoppedMessage:
        """Take back the session's newest message, in one atomic step (``scripts.POP``): the
        message (None when the session keeps none) and the ``message_count`` after it.
        ``SessionNotFound``; ``SessionBusy`` while a background run reads the session. With
        ``once``, as ``append_events`` says: one message per key, however often it is sent."""
        keys = self._keys.session(session_id)
        script_keys = [keys.meta, keys.messages, keys.lock]
        if once is not None:
            script_keys.append(keys.once(once.digest))
        fingerprint = once.fingerprint if once is not None else ""
        with database_errors():
            found = self._pop(keys=script_keys, args=[to_ms(self._clock.now()), fingerprint])
        if int(found[0]) == -2:
            raise IdempotencyKeyReused()
        if int(found[0]) == 0:
            raise SessionNotFound(session_id)
        if int(found[0]) < 0:
            raise SessionBusy(session_id)
        member, count = str(found[1]), int(found[2])
        message = decode_member(member) if member else None
        return PoppedMessage(session_id=session_id, message=message, message_count=count)

    def delete(self, session_id: str) -> None:
        """Forget the session's working memory; ``SessionNotFound`` if there is none.

        Two steps on two slots: delete the session's keys (reading the expiry they had), then
        drop it from the store's indexes with a tombstone. See ``scripts.FORGET`` for why an append
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
                pipe.hmget(keys.meta, LIST_FIELDS)
                pipe.exists(keys.lock)
            rows = pipe.execute()
        now_ms = to_ms(self._clock.now())
        sessions = []
        for session_id, values, locked in zip(ids[:limit], rows[::2], rows[1::2], strict=True):
            raw = {k: v for k, v in zip(LIST_FIELDS, values, strict=True) if v is not None}
            meta = live_meta(session_id, raw, now_ms, running=bool(locked))
            if meta is not None:
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
                self._keys.extraction,
                [ExtractionFields.last_extraction_at, ExtractionFields.last_extraction_error],
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
