"""Pydantic models of working memory: events in, messages, and the views of a session, of its
extraction and of a page of sessions.
"""

from __future__ import annotations

import unicodedata
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    StringConstraints,
    model_validator,
)

from agent_memory.models import (
    MAX_MESSAGE_CHARS,
    MAX_NAME_CHARS,
    ActorId,
    Model,
    UtcDatetime,
    View,
    compact_json,
    is_blank,
)

# --- working memory --------------------------------------------------------------------------

Role = Literal["user", "assistant", "system", "tool"]


_NAME_REFUSED_CATEGORIES = {
    "Cc": "a control character",
    "Cf": "an invisible format character",
    "Cs": "a lone surrogate",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
}


def _speaker_name(value: str) -> str:
    """A message's ``name``: printable text on one line (DESIGN section 4b). Control (Cc, which
    holds tab, CR, LF, VT, FF, U+001C-U+001E and U+0085), format (Cf: bidirectional controls,
    zero-width characters, tags), surrogate (Cs) and line or paragraph separator (Zl, Zp)
    characters are refused, as is a name that shows nothing (``is_blank``: spaces, joiners,
    Hangul fillers). The zero-width joiner and non-joiner (U+200D, U+200C) are kept: emoji
    sequences and several scripts need them."""
    for position, char in enumerate(value):
        kind = _NAME_REFUSED_CATEGORIES.get(unicodedata.category(char))
        if kind is not None and char not in "\u200c\u200d":
            raise ValueError(
                f"must not contain {kind} (U+{ord(char):04X} at position {position}); "
                "a name is one line of printable text"
            )
    if is_blank(value):
        raise ValueError("must show at least one visible character")
    return value


SpeakerName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_NAME_CHARS),
    AfterValidator(_speaker_name),
]


def item_text(item: dict[str, Any]) -> str:
    """An item's stored JSON text: compact, its keys in the order given, text as UTF-8 (not
    ``\\u`` escapes), so that it reads back as the same JSON value, key order included."""
    return compact_json(item)


def _item(item: dict[str, Any]) -> dict[str, Any]:
    """A message's ``item``: a JSON object of at most ``MAX_MESSAGE_CHARS`` characters as
    ``item_text`` writes it."""
    size = len(item_text(item))
    if size > MAX_MESSAGE_CHARS:
        raise ValueError(f"is {size} characters as JSON; an item holds at most {MAX_MESSAGE_CHARS}")
    return item


MessageItem = Annotated[
    dict[str, Any],
    AfterValidator(_item),
    Field(
        description="A structured item kept exactly as given (a tool call, a tool result with "
        "its call id, a reasoning item, a framework's own message form): any JSON object of "
        f"at most {MAX_MESSAGE_CHARS} characters as compact JSON, returned as the same JSON "
        "value, its keys in the order given. Prompts and context show the message's content "
        "(the item's JSON text when no content is given), quoted as any text from callers."
    ),
]


class EventIn(Model):
    """One message to add. ``created_at`` defaults to the time the server receives it.

    ``name`` (who spoke, when the role alone does not say) is 1 to ``MAX_NAME_CHARS``
    characters of one-line printable text (``_speaker_name``). ``item`` keeps a structured
    form of the message as given (``MessageItem``); ``content`` may then be left out, and is
    the item's JSON text (``item_text``)."""

    role: Role
    content: (
        Annotated[str, StringConstraints(min_length=1, max_length=MAX_MESSAGE_CHARS)] | None
    ) = Field(None, description="The message's text; required unless item is given.")
    name: SpeakerName | None = None
    created_at: UtcDatetime | None = Field(None, strict=False)
    item: MessageItem | None = None

    @model_validator(mode="after")
    def _content_or_item(self) -> EventIn:
        if self.content is None:
            if self.item is None:
                raise ValueError("content is required unless item is given")
            self.content = item_text(self.item)
        return self

    @property
    def text(self) -> str:
        """The message's content (the item's JSON text when none was given)."""
        return self.content or ""


class EventsRequest(Model):
    """Body of ``POST .../sessions/{session}/events``."""

    actor_id: ActorId | None = None
    events: list[EventIn] = Field(min_length=1)


class EventsResult(View):
    """Answer of ``POST .../events``: messages added and the session's ``message_count``."""

    session_id: str
    added: int
    message_count: int


class ExtractionQueued(View):
    """Answer of ``POST .../sessions/{session_id}/extract`` (202)."""

    session_id: str
    status: Literal["queued"] = "queued"


class Message(View):
    """A message kept verbatim. ``seq`` is its position in the session, from 1; ``item`` its
    structured form, as it was given (``MessageItem``), or null."""

    seq: int
    role: Role
    content: str
    name: str | None = None
    created_at: datetime
    item: dict[str, Any] | None = None


class PoppedMessage(View):
    """Answer of ``POST .../sessions/{session_id}/pop``: the message taken back (null when the
    session kept none) and the session's ``message_count`` after it."""

    session_id: str
    message: Message | None
    message_count: int


class ExtractionStatus(View):
    """A session's background extraction: ``status``, the armed schedule's ``due_at``, the last
    run's time and error, and how many messages are ``unread``."""

    status: Literal["idle", "waiting", "running", "failed"]
    due_at: datetime | None = None
    last_run_at: datetime | None = None
    last_error: str | None = None
    unread: int


class SessionView(View):
    """A session: its summary, newest messages (oldest first), counts, times and extraction;
    ``messages_omitted``: the oldest of the messages asked for left out to keep the answer
    under its byte budget (``answers``)."""

    session_id: str
    actor_id: str | None
    summary: str | None
    messages: list[Message]
    message_count: int
    created_at: datetime
    last_event_at: datetime
    expires_at: datetime
    extraction: ExtractionStatus
    messages_omitted: int = Field(
        0,
        description="The oldest of the messages asked for (recent, before_seq) left out to "
        "keep the answer under its byte budget (0 when none were); GET again with before_seq "
        "set to the first message's seq to read them.",
    )


class SessionSummary(View):
    """A session as the listing shows it, with its extraction status (as ``SessionView``)."""

    session_id: str
    actor_id: str | None
    message_count: int
    created_at: datetime
    last_event_at: datetime
    expires_at: datetime
    extraction: ExtractionStatus


class SessionList(View):
    """A page of sessions, most recent first; ``next_offset`` is null on the last page."""

    sessions: list[SessionSummary]
    next_offset: int | None
