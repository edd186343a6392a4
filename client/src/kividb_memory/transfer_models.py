"""The bodies and answers of export and import (``GET .../export/...``, ``PUT``/``POST
.../import/...``), as the client sends and reads them; apart from ``models`` because only
``tools.transfer`` and callers moving a store use them. ``models`` re-exports every one, so
``kividb_memory.models.SessionExport`` is the same class."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from kividb_memory.model_bases import Answer, Request, Role


class SessionIdPage(Answer):
    """A page of a store's live session ids (in no order; one may be on two pages);
    ``next_cursor`` is ``None`` on the last page."""

    session_ids: list[str]
    next_cursor: str | None


class ExportedMessage(Answer):
    """A message as a session keeps it, with its sequence number ``seq``."""

    seq: int
    role: Role
    content: str
    name: str | None = None
    created_at: datetime
    item: dict[str, Any] | None = None


class SessionExport(Answer):
    """A session's whole state and a page of its messages (after ``after_seq``, oldest first);
    ``next_after_seq`` is the ``after_seq`` of the next page, ``None`` on the last."""

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


class ImportedMessage(Request):
    """A message of ``SessionImport.messages``: an ``ExportedMessage``'s fields."""

    seq: int
    role: Role
    content: str
    name: str | None = None
    created_at: datetime | str
    item: dict[str, Any] | None = None


class SessionImport(Request):
    """Body of ``PUT .../import/sessions/{session_id}``: a ``SessionExport``'s fields (without
    ``session_id`` and ``next_after_seq``) with a page of at most 200 messages."""

    actor_id: str | None = None
    summary: str | None = None
    message_count: int
    created_at: datetime | str
    last_event_at: datetime | str
    expires_at: datetime | str
    read_seq: int | None = None
    folded_seq: int | None = None
    failures: int | None = None
    last_error: str | None = None
    last_run_at: datetime | str | None = None
    pending: str | None = None
    messages: list[ImportedMessage] | None = None


class SessionImported(Answer):
    """Answer of a session import: the session's ``message_count`` and ``expires_at`` now, and
    how many of the page's messages it did not have yet."""

    session_id: str
    message_count: int
    expires_at: datetime
    messages_added: int


class ExportedSource(Answer):
    """Where an exported memory came from (as ``MemorySource``)."""

    session_id: str | None = None
    first_seq: int | None = None
    last_seq: int | None = None
    seqs: list[int] | None = None
    consolidation_id: str | None = None
    restored_from: str | None = None


class ExportedVersion(Answer):
    """An exported memory's state before a change (as ``MemoryVersion``)."""

    text: str
    type: str
    topics: list[str]
    metadata: dict[str, Any]
    importance: float | None
    changed_at: datetime


class ExportedMemory(Answer):
    """A memory with every field it keeps, its ``versions`` and its ``vector`` (the float32
    values as kept, little-endian bytes in base64)."""

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


class MemoryExportPage(Answer):
    """About ``limit`` exported memories; ``next_cursor`` is ``None`` on the last page (a
    memory may be on two pages); ``read_at`` the server's time when the page began to be read
    (``None`` from servers before it)."""

    memories: list[ExportedMemory]
    next_cursor: str | None
    read_at: datetime | None = None


class ImportedSource(Request):
    session_id: str | None = None
    first_seq: int | None = None
    last_seq: int | None = None
    seqs: list[int] | None = None
    consolidation_id: str | None = None
    restored_from: str | None = None


class ImportedVersion(Request):
    text: str
    type: str
    topics: list[str] | None = None
    metadata: dict[str, Any] | None = None
    importance: float | None = Field(None, strict=False)
    changed_at: datetime | str


class ImportedMemory(Request):
    """A memory of ``MemoryImportBatch.memories``: an ``ExportedMemory``'s fields."""

    id: str
    text: str
    type: str | None = None
    actor_id: str | None = None
    topics: list[str] | None = None
    metadata: dict[str, Any] | None = None
    importance: float | None = Field(None, strict=False)
    confidence: float | None = Field(None, strict=False)
    created_at: datetime | str
    updated_at: datetime | str
    expires_at: datetime | str
    source: ImportedSource | None = None
    versions: list[ImportedVersion] | None = None
    occurred_at: datetime | str | None = None
    valid_from: datetime | str | None = None
    valid_until: datetime | str | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    vector: str


class MemoryImportBatch(Request):
    """Body of ``POST .../import/memories``: 1 to 100 memories."""

    memories: list[ImportedMemory]


class MemoryImportResult(Answer):
    """Answer of a memory import: how many were written, and the ids left out because their
    time was up."""

    imported: int
    expired: list[str]
