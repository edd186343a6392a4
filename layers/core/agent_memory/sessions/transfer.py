"""Export and import of a store's sessions, losslessly, for moving a store to another database
(``tools/transfer.py`` over the public API; docs/routes.md, "Export and import"). Its sibling
``memories.transfer`` moves the store's memories; the two share nothing but the cursor check
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

Keys: the same as the routes that write (``database/keys.py``); every script touches one slot, the
session's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

import redis
from pydantic import Field, StringConstraints, model_validator

from agent_memory.clock import Clock, from_ms, to_ms
from agent_memory.database.client import database_errors
from agent_memory.database.scripts import load_script
from agent_memory.errors import ActorMismatch, Conflict, SessionNotFound, ValidationFailed
from agent_memory.models import MAX_MESSAGE_CHARS, MAX_RECENT, ActorId, Model, UtcDatetime, View
from agent_memory.sessions import scripts
from agent_memory.sessions.models import Role, SpeakerName
from agent_memory.sessions.records import encode_message, live_meta, member_fields, message_member
from agent_memory.sessions.service import TOUCH_PRUNE_BATCH
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
it: JSON of at most ``background.prompts.MAX_MEMORIES_PER_RUN`` (50) items of at most
``background.prompts.MAX_MEMORY_CHARS`` (2,000) characters of text and their topics, about 150,000
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
        self._export = load_script(client, scripts.EXPORT)
        self._import = load_script(client, scripts.IMPORT)
        self._touch = load_script(client, scripts.TOUCH)

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
        meta = live_meta(session_id, raw, to_ms(self._clock.now()))
        if meta is None:
            raise SessionNotFound(session_id)
        messages = [ExportedMessage(**member_fields(str(m))) for m in members[:limit]]
        more = len(members) > limit
        return SessionExport(
            session_id=session_id,
            actor_id=meta.actor_id,
            summary=meta.summary,
            message_count=meta.message_count,
            created_at=meta.created_at,
            last_event_at=meta.last_event_at,
            expires_at=meta.expires_at,
            read_seq=meta.read_seq,
            folded_seq=meta.folded_seq,
            failures=meta.failures,
            last_error=meta.last_error,
            last_run_at=meta.last_run_at,
            pending=meta.record.pending,
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
            stored = encode_message(
                message.role, message.content, message.name, to_ms(message.created_at)
            )
            pairs += [message.seq, message_member(message.seq, stored)]
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


def int_cursor(cursor: str | None) -> int:
    """The number in a paging cursor this API gave (0 for none; ``memories.transfer`` uses it for
    the HSCAN half of its cursors); ``ValidationFailed`` for any other text."""
    if cursor is None:
        return 0
    if not cursor.isdigit() or len(cursor) > 20:
        raise ValidationFailed(
            "The cursor is not one this API gave.",
            details=[{"field": "cursor", "problem": "give the next_cursor of the page before"}],
        )
    return int(cursor)
