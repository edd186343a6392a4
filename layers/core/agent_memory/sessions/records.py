"""What a session keeps in the database: its meta hash (``SessionRecord``, the names in
``SessionFields``) and its messages (``encode_message`` / ``decode_member``, the names in
``MessageFields``), typed in one place for Python and for the Lua of ``sessions.scripts``.

The meta hash (``database.keys.SessionKeys.meta``) holds text values, as Redis does: numbers as
decimal digits (times in ms since the epoch, UTC), a field that holds nothing is absent (or, for a
few written by older code, empty). A message is a member ``<seq>:<json>`` of the session's sorted
set of messages, scored by its sequence number; the JSON has ``role``, ``content``, ``name`` (only
when given) and ``created_at`` (ms).

What the background fields mean (``read_seq``, ``pending``, ``folded_seq``, ``armed_due``...):
``background.work``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, field_validator

from agent_memory.clock import from_ms
from agent_memory.sessions.models import ExtractionStatus, Message, SessionSummary

EXTRACTION_MAX_FAILURES = 5
"""After this many failed runs in a row a session's extraction shows ``failed`` and is not
retried until new messages arrive (which give it a fresh start)."""


class SessionRecord(BaseModel):
    """A session's meta hash, decoded: every field as stored, ``None`` when absent or empty.

    Times are ms since the epoch. ``created_at`` is also the session's life (``SessionMeta.life``):
    which session of that id this is (background runs change a session only while it is the same
    one, and a deleted session leaves only ``deleted_expires``)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    seq: int = 0
    """The last sequence number given: the session's ``message_count``."""
    created_at: int | None = None
    actor_id: str | None = None
    last_event_at: int = 0
    expires_at: int = 0
    summary: str | None = None
    read_seq: int = 0
    """The extraction cursor: the last message extraction has read."""
    folded_seq: int = 0
    """The last message folded into ``summary``."""
    pending: str | None = None
    """The JSON of a model's answer for messages ``from..to`` not all kept yet."""
    armed_due: int | None = None
    fold_requested: int | None = None
    requested_at: int | None = None
    failures: int = 0
    last_run_at: int | None = None
    last_error: str | None = None
    deleted_expires: int | None = None
    """The expiry a deleted session had (the only field a deleted session keeps)."""

    @field_validator("*", mode="before")
    @classmethod
    def _absent_when_empty(cls, value: Any) -> Any:
        # A field written empty (older code cleared some this way) holds nothing.
        return None if value == "" else value

    @classmethod
    def from_hash(cls, raw: Mapping[str, str]) -> SessionRecord:
        """The record of a meta hash read with a text client (``HGETALL`` or ``HMGET`` of
        some fields, the absent ones left out); numbers as text."""
        return cls.model_validate({k: v for k, v in raw.items() if v is not None})


class SessionFields:
    """The stored name of every ``SessionRecord`` field (exactly those; a unit test checks)."""

    seq: Final = "seq"
    created_at: Final = "created_at"
    actor_id: Final = "actor_id"
    last_event_at: Final = "last_event_at"
    expires_at: Final = "expires_at"
    summary: Final = "summary"
    read_seq: Final = "read_seq"
    folded_seq: Final = "folded_seq"
    pending: Final = "pending"
    armed_due: Final = "armed_due"
    fold_requested: Final = "fold_requested"
    requested_at: Final = "requested_at"
    failures: Final = "failures"
    last_run_at: Final = "last_run_at"
    last_error: Final = "last_error"
    deleted_expires: Final = "deleted_expires"


class ExtractionFields:
    """The fields of a store's extraction record (``database.keys.StoreKeys.extraction``): the
    outcome of the store's latest background runs."""

    last_extraction_at: Final = "last_extraction_at"
    last_extraction_error: Final = "last_extraction_error"
    last_extraction_error_at: Final = "last_extraction_error_at"


class MessageFields:
    """The names in a stored message's JSON."""

    role: Final = "role"
    content: Final = "content"
    name: Final = "name"
    created_at: Final = "created_at"
    item: Final = "item"


def session_field_names() -> dict[str, str]:
    """``{name: name}`` of every field of the meta hash and of the store's extraction record:
    the mapping session Lua is templated with (``sessions.scripts.lua``), taken from the model
    itself and ``ExtractionFields``."""
    names = {name: name for name in SessionRecord.model_fields}
    names.update((n, n) for n in vars(ExtractionFields) if not n.startswith("_"))
    return names


LIST_FIELDS = (
    SessionFields.actor_id,
    SessionFields.seq,
    SessionFields.created_at,
    SessionFields.last_event_at,
    SessionFields.expires_at,
    # extraction status (SessionMeta.extraction)
    SessionFields.read_seq,
    SessionFields.armed_due,
    SessionFields.failures,
    SessionFields.last_run_at,
    SessionFields.last_error,
)
"""The meta fields a listing reads: what ``SessionSummary`` shows. Not ``summary``, which the
listing does not show and which may hold 8,000 characters a session (``GET`` of one session
reads it): with it, listing 200 such sessions read 1.6 MB from the database."""


class SessionMeta:
    """A live session's meta record, with what its views compute from it. ``running``: a
    background run holds the session's lock (the reader says)."""

    def __init__(
        self, session_id: str, record: SessionRecord, life: str, *, running: bool = False
    ) -> None:
        self.session_id = session_id
        self.record = record
        self.running = running
        self.life = life
        """The raw ``created_at``: which life of the session id this is (background runs
        change the session only while it is the same one)."""

    @property
    def actor_id(self) -> str | None:
        """The actor the session belongs to, if any."""
        return self.record.actor_id

    @property
    def message_count(self) -> int:
        """The last sequence number given."""
        return self.record.seq

    @property
    def created_at(self) -> datetime:
        """When this life of the session began."""
        return from_ms(self.record.created_at or 0)

    @property
    def last_event_at(self) -> datetime:
        """When its newest message was added."""
        return from_ms(self.record.last_event_at)

    @property
    def expires_at(self) -> datetime:
        """When it expires, unless a message comes first."""
        return from_ms(self.record.expires_at)

    @property
    def summary(self) -> str | None:
        """The running summary of the folded messages."""
        return self.record.summary

    @property
    def read_seq(self) -> int:
        """The extraction cursor."""
        return self.record.read_seq

    @property
    def folded_seq(self) -> int:
        """The last message folded into the summary."""
        return self.record.folded_seq

    @property
    def armed_due(self) -> datetime | None:
        """The due time of the armed extraction schedule, if one is armed."""
        armed = self.record.armed_due
        return from_ms(armed) if armed else None

    @property
    def failures(self) -> int:
        """Failed background runs in a row."""
        return self.record.failures

    @property
    def last_run_at(self) -> datetime | None:
        """When the latest background run ended."""
        last_run = self.record.last_run_at
        return from_ms(last_run) if last_run else None

    @property
    def last_error(self) -> str | None:
        """The error of the latest failed run, cleared by the next that succeeds."""
        return self.record.last_error

    @property
    def requested(self) -> bool:
        """Whether a client asked for extraction now (``POST .../extract``)."""
        return bool(self.record.requested_at)

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


def live_meta(
    session_id: str, raw: Mapping[str, str], now_ms: int, *, running: bool = False
) -> SessionMeta | None:
    """The metadata of a live session from its meta hash ``raw`` (``HGETALL`` or the fields
    of ``LIST_FIELDS``), or None when there is none: absent, deleted (only a tombstone with
    ``deleted_expires`` is left) or expired (``expires_at`` at or before ``now_ms``)."""
    if SessionFields.seq not in raw or int(raw.get(SessionFields.expires_at) or 0) <= now_ms:
        return None
    record = SessionRecord.from_hash(raw)
    return SessionMeta(
        session_id, record, str(raw.get(SessionFields.created_at, "")), running=running
    )


def encode_message(
    role: str,
    content: str,
    name: str | None,
    created_at_ms: int,
    item: Mapping[str, Any] | None = None,
) -> str:
    """A message's stored JSON (``MessageFields``: ``name`` and ``item`` only when given), the
    part of a ``messages`` member after ``<seq>:``. The item is kept as the JSON value it is,
    its keys in their order."""
    doc: dict[str, Any] = {MessageFields.role: role, MessageFields.content: content}
    if name is not None:
        doc[MessageFields.name] = name
    doc[MessageFields.created_at] = created_at_ms
    if item is not None:
        doc[MessageFields.item] = item
    # ensure_ascii=False keeps text byte for byte as UTF-8 (emoji, ZWJ sequences, CJK).
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def message_member(seq: int, stored: str) -> str:
    """The sorted-set member of a message: ``<seq>:<stored JSON>``."""
    return f"{seq}:{stored}"


def member_fields(member: str) -> dict[str, Any]:
    """The fields of a message from its stored form ``<seq>:<json>``: ``seq``, ``role``,
    ``content``, ``name`` (None when not given), ``created_at`` (a datetime) and ``item`` (None
    when not given), the fields of ``Message`` and of the export's ``ExportedMessage``."""
    seq, _, payload = member.partition(":")
    doc = json.loads(payload)
    return {
        "seq": int(seq),
        "role": doc[MessageFields.role],
        "content": doc[MessageFields.content],
        "name": doc.get(MessageFields.name),
        "created_at": from_ms(doc[MessageFields.created_at]),
        "item": doc.get(MessageFields.item),
    }


def decode_member(member: str) -> Message:
    """A message from its stored form ``<seq>:<json>``."""
    return Message(**member_fields(member))
