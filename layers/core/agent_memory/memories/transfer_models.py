"""The bodies and answers of the memory export and import routes (``transfer`` moves the
memories; docs/routes.md, "Export and import"): every field of a kept memory, its versions and
its vector as base64 float32, with the same checks as the routes that write one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import Field, StringConstraints, model_validator

from agent_memory.memories.models import (
    MAX_TOPICS,
    MAX_VERSIONS,
    MemoryId,
    Metadata,
    Topic,
    UnitInterval,
    VisibleMemoryText,
)
from agent_memory.models import ActorId, Model, SessionId, UtcDatetime, View
from agent_memory.sessions.transfer import MAX_SEQ, Problem, invalid

MAX_IMPORT_MEMORIES = 100
"""Memories per import call (and the most an export page holds, ``limit``)."""
MAX_CURSOR_CHARS = 400
"""The longest cursor a memory export page gives: two ``HSCAN`` cursors (20 digits each), a
memory id and an actor bucket (an actor id: at most 256 characters)."""
VECTOR_NORM_TOLERANCE = 1e-4
"""An imported vector whose length is within this of 1 is kept byte for byte (it is what an
export gave); another is scaled to length 1, as an added memory's is."""


# --- models ------------------------------------------------------------------------------------


class ExportedSource(View):
    """Where a memory came from (``MemorySource``), as kept."""

    session_id: str | None = None
    first_seq: int | None = None
    last_seq: int | None = None
    seqs: list[int] | None = None
    consolidation_id: str | None = None
    restored_from: str | None = None


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
    page may hold a few more, and fewer when more would pass the answer's byte budget);
    ``next_cursor`` is null on the last page. A memory kept for the whole export is on some
    page; one may be on two. ``read_at`` is the server's time when the page began to be read:
    every memory kept at the first page's ``read_at`` and still kept at the end is on some
    page, so an export of a store being written can be made the store as it was then (keep the
    memories created by then, each as it was then: ``tools.transfer`` does)."""

    memories: list[ExportedMemory]
    next_cursor: str | None
    read_at: datetime


Seq = Annotated[int, Field(ge=1, le=MAX_SEQ)]


class ImportedSource(Model):
    """Where an extracted memory came from, as extraction records it: the messages the call
    read (``first_seq`` to ``last_seq``) and those the memory comes from (``seqs``, among
    them), each a sequence number a session import takes (at most ``MAX_SEQ``)."""

    session_id: SessionId | None = None
    first_seq: Seq | None = None
    last_seq: Seq | None = None
    seqs: list[Seq] | None = Field(None, max_length=1000)
    consolidation_id: Annotated[str, StringConstraints(pattern=r"^con_[0-9a-f]{20}$")] | None = None
    restored_from: Annotated[str, StringConstraints(pattern=r"^mem_[0-9a-f]{20}$")] | None = None

    @model_validator(mode="after")
    def _within(self) -> ImportedSource:
        low, high = self.first_seq, self.last_seq
        if low is not None and high is not None and low > high:
            raise ValueError("needs first_seq <= last_seq")
        outside = [
            n
            for n in self.seqs or []
            if (low is not None and n < low) or (high is not None and n > high)
        ]
        if outside:
            raise ValueError(f"seqs {outside[0]} is outside first_seq to last_seq")
        return self


TypeName = Annotated[str, StringConstraints(min_length=1, max_length=40)]


class ImportedVersion(Model):
    text: VisibleMemoryText
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
    text: VisibleMemoryText
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
        problems = self.problems()
        if problems:
            raise invalid("ImportedMemory", problems)
        return self

    def problems(self) -> list[Problem]:
        """Each field that the rest of the memory contradicts: its times in order
        (``created_at <= updated_at``, ``created_at <= valid_from <= valid_until <=
        expires_at``, ``valid_from < expires_at``, each version's ``changed_at`` from
        ``created_at`` to ``updated_at``, newest first) and its links (``valid_until`` and
        ``superseded_by`` together, never itself, never one memory on both sides). The links'
        other ends are checked with the batch and the store (``MemoryTransfer``)."""
        return self._time_problems() + self._link_problems()

    def _time_problems(self) -> list[Problem]:
        problems: list[Problem] = []
        start = self.valid_from or self.created_at
        if self.updated_at < self.created_at:
            problems.append((("updated_at",), "must not be before created_at"))
        if start < self.created_at:
            problems.append((("valid_from",), "must not be before created_at"))
        elif start >= self.expires_at:
            problems.append((("valid_from",), "must be before expires_at"))
        if self.valid_until is not None and self.valid_until < start:
            problems.append((("valid_until",), "must not be before valid_from"))
        elif self.valid_until is not None and self.valid_until > self.expires_at:
            problems.append((("valid_until",), "must not be after expires_at"))
        newer = self.updated_at
        for at, version in enumerate(self.versions):
            if not self.created_at <= version.changed_at <= newer:
                problem = "must lie from created_at to updated_at, and not after the version "
                problems.append(
                    (("versions", at, "changed_at"), problem + "before it (newest first)")
                )
            else:
                newer = version.changed_at
        return problems

    def _link_problems(self) -> list[Problem]:
        problems: list[Problem] = []
        if (self.valid_until is None) != (self.superseded_by is None):
            problem = "must be given exactly when valid_until is (a memory has both "
            problems.append(
                (("superseded_by",), problem + "valid_until and superseded_by, or neither)")
            )
        for field in ("supersedes", "superseded_by"):
            if getattr(self, field) == self.id:
                problems.append(((field,), "a memory cannot supersede itself"))
        if self.supersedes is not None and self.supersedes == self.superseded_by:
            problems.append((("superseded_by",), "must not be the memory it supersedes"))
        return problems


class MemoryImportBatch(Model):
    """Body of ``POST .../import/memories``: 1 to ``MAX_IMPORT_MEMORIES`` memories."""

    memories: list[ImportedMemory] = Field(min_length=1, max_length=MAX_IMPORT_MEMORIES)


class MemoryImportResult(View):
    """Answer of a memory import: how many were written (a memory imported again is written
    again, the same), and the ids left out because their time was up (``expires_at`` passed)."""

    imported: int
    expired: list[str]
