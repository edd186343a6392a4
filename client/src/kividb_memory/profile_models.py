"""What steers a store's extraction, and an actor's profile, as the client sends and reads them:
the ``extraction_examples`` and ``profile_fields`` settings and the answers of ``GET``/``PATCH
.../actors/{actor}/profile`` and its history; the conventions of ``kividb_memory.models`` hold
(it re-exports these)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from kividb_memory.model_bases import Answer, Request, Role

ProfileFieldType = Literal["text", "list", "number", "boolean", "date"]
ProfileValue = str | float | int | bool | list[str]


class ExampleMessage(Answer):
    """One message of an example conversation."""

    role: Role
    content: str


class ExampleMemory(Answer):
    """A memory an example conversation should give."""

    text: str
    type: str = "semantic"


class ExtractionExample(Answer):
    """An example for extraction (``StorePut.extraction_examples``): a short conversation and
    the memories it should give (none teaches what not to keep)."""

    messages: list[ExampleMessage]
    memories: list[ExampleMemory]


class ProfileField(Answer):
    """A field of an actor's profile (``StorePut.profile_fields``): its name, what it holds,
    and its type."""

    name: str
    description: str
    type: ProfileFieldType = "text"


class ProfileSource(Answer):
    """Who set a profile value: ``extraction`` (of a session's messages ``first_seq`` to
    ``last_seq``) or ``caller``."""

    by: Literal["extraction", "caller"]
    session_id: str | None = None
    first_seq: int | None = None
    last_seq: int | None = None


class ProfileEntry(Answer):
    """One profile field's value, when it was set and by whom."""

    value: ProfileValue | None
    updated_at: datetime
    source: ProfileSource


class ProfileView(Answer):
    """An actor's profile: the fields that hold a value, by name."""

    actor_id: str
    fields: dict[str, ProfileEntry]


class ProfilePatch(Request):
    """Body of ``PATCH .../actors/{actor}/profile``: new values by field (None clears)."""

    fields: dict[str, Any]


class ProfileHistory(Answer):
    """One profile field's versions, newest first."""

    actor_id: str
    field: str
    versions: list[ProfileEntry]


class ExportedProfile(Answer):
    """An actor's profile as exported: each field's current entry and its versions, newest
    first."""

    actor_id: str
    fields: dict[str, ProfileEntry]
    history: dict[str, list[ProfileEntry]]


class ProfileExportPage(Answer):
    """A page of ``GET .../export/profiles``; ``next_cursor`` None on the last."""

    profiles: list[ExportedProfile]
    next_cursor: str | None


class ImportedProfileSource(Request):
    """A value's ``source`` as exported."""

    by: Literal["extraction", "caller"]
    session_id: str | None = None
    first_seq: int | None = None
    last_seq: int | None = None


class ImportedProfileEntry(Request):
    """One value as exported."""

    value: Any
    updated_at: datetime | str
    source: ImportedProfileSource


class ImportedProfile(Request):
    """An ``ExportedProfile`` to import."""

    actor_id: str
    fields: dict[str, ImportedProfileEntry]
    history: dict[str, list[ImportedProfileEntry]] | None = None


class ProfileImportBatch(Request):
    """Body of ``POST .../import/profiles``."""

    profiles: list[ImportedProfile]


class ProfileImportResult(Answer):
    """How many profiles an import wrote."""

    imported: int
