"""An actor's profile as the API shows and takes it: the fields a store declares
(``stores.steering.ProfileField``) with one value each, where it came from and when, and every
field's history (DESIGN "Round 4 additions": ``GET``/``PATCH .../actors/{actor}/profile``,
``GET .../profile/history?field=``).

``checked_value`` is the one rule of what a field of each type holds, for a caller's ``PATCH``
(a wrong value is 422 naming ``fields.<name>``) and for extraction (a wrong value is dropped and
counted).
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import Field

from agent_memory.models import ActorId, Model, SessionId, UtcDatetime, View, is_blank
from agent_memory.stores.steering import ProfileField

MAX_PROFILE_TEXT_CHARS = 1000
"""A ``text`` field's value at most."""
MAX_PROFILE_LIST_ITEMS = 20
MAX_PROFILE_ITEM_CHARS = 200
"""A ``list`` field holds at most this many strings of at most this many characters."""
MAX_PROFILE_VERSIONS = 20
"""Versions a field keeps (newest first); older ones go. With the limits above, an actor's
whole profile and history hold at most 20 fields x 20 versions x 4,000 characters (1.6 million
characters; about 3.2 MB of JSON when every character needs an escape), so one actor always
fits an export page under Lambda's 6 MB (``answers``)."""
_DAY = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
ProfileValue = str | float | int | bool | list[str]
"""What a field holds: a string (``text``, and ``date`` as ``YYYY-MM-DD``), a number, a
boolean or a list of strings."""


class ProfileSource(View):
    """Who set a value: ``extraction`` (the session and the messages, by ``seq``, that the
    extraction call read) or ``caller`` (a ``PATCH``)."""

    by: Literal["extraction", "caller"]
    session_id: str | None = None
    first_seq: int | None = None
    last_seq: int | None = None


class ProfileEntry(View):
    """One field's value, when it was set (``updated_at``) and by whom (``source``)."""

    value: ProfileValue | None
    updated_at: datetime
    source: ProfileSource


class ProfileView(View):
    """Answer of ``GET .../actors/{actor}/profile``: the fields with a value, by name (none
    when nothing is known yet)."""

    actor_id: str
    fields: dict[str, ProfileEntry]


class ProfilePatch(Model):
    """Body of ``PATCH .../actors/{actor}/profile``: the fields to set, by name, each with its
    new value (``null`` clears it). Every name must be one of the store's ``profile_fields`` and
    every value of the field's type, or nothing changes (422 naming ``fields.<name>``)."""

    fields: Annotated[dict[str, Any], Field(min_length=1, max_length=20)]


class ProfileHistory(View):
    """Answer of ``GET .../actors/{actor}/profile/history?field=``: the field's versions, newest
    first (a cleared field's version has ``value`` null), at most ``MAX_PROFILE_VERSIONS``."""

    actor_id: str
    field: str
    versions: list[ProfileEntry]


def checked_value(field: ProfileField, value: object) -> ProfileValue:
    """``value`` as field ``field`` holds it, or ``ValueError`` saying what it must be:
    ``text`` a visible string of at most ``MAX_PROFILE_TEXT_CHARS`` (stripped), ``list`` a
    list of visible strings (at most ``MAX_PROFILE_LIST_ITEMS`` of ``MAX_PROFILE_ITEM_CHARS``;
    a single string is a list of one),
    ``number`` a finite number (not a boolean), ``boolean`` true or false, ``date`` an ISO 8601
    calendar date ``YYYY-MM-DD``."""
    kind = field.type
    if kind == "text":
        return _text(value)
    if kind == "list":
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or len(items) > MAX_PROFILE_LIST_ITEMS:
            raise ValueError(f"must be a list of at most {MAX_PROFILE_LIST_ITEMS} strings")
        return [_text(item, MAX_PROFILE_ITEM_CHARS) for item in items]
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError("must be a number")
        if not math.isfinite(value) or abs(value) > 1e15:
            raise ValueError("must be a finite number of at most 1e15")
        return value
    if kind == "boolean":
        if not isinstance(value, bool):
            raise ValueError("must be true or false")
        return value
    if not isinstance(value, str) or not _DAY.match(value.strip()):
        raise ValueError("must be a date, YYYY-MM-DD")
    try:
        return date.fromisoformat(value.strip()).isoformat()
    except ValueError:
        raise ValueError("must be a date, YYYY-MM-DD") from None


def _text(value: object, limit: int = MAX_PROFILE_TEXT_CHARS) -> str:
    if not isinstance(value, str) or is_blank(value) or len(value.strip()) > limit:
        raise ValueError(f"must be a text of 1 to {limit} characters")
    return value.strip()


# --- export and import ------------------------------------------------------------------------


class ExportedProfile(View):
    """An actor's profile as exported: each field's current entry (``fields``) and its
    versions, newest first (``history``), as kept."""

    actor_id: str
    fields: dict[str, ProfileEntry]
    history: dict[str, list[ProfileEntry]]


class ProfileExportPage(View):
    """Answer of ``GET .../export/profiles``: some actors' profiles (fewer than ``limit`` when
    more would pass the answer's byte budget) and ``next_cursor`` (null on the last page). A
    profile kept for the whole export is on some page; one may be on two."""

    profiles: list[ExportedProfile]
    next_cursor: str | None


class ImportedProfileSource(Model):
    """A value's ``source`` as exported."""

    by: Literal["extraction", "caller"]
    session_id: SessionId | None = None
    first_seq: Annotated[int, Field(ge=1, le=2**53)] | None = None
    last_seq: Annotated[int, Field(ge=1, le=2**53)] | None = None


class ImportedProfileEntry(Model):
    """One value as exported: the value (checked against the store's field when imported),
    when it was set and by whom."""

    value: Any
    updated_at: UtcDatetime = Field(strict=False)
    source: ImportedProfileSource


class ImportedProfile(Model):
    """An ``ExportedProfile`` to import: ``fields`` and their ``history`` (newest first, at
    most ``MAX_PROFILE_VERSIONS`` a field), each name one of the store's ``profile_fields``."""

    actor_id: ActorId
    fields: Annotated[dict[str, ImportedProfileEntry], Field(max_length=20)]
    history: Annotated[
        dict[str, Annotated[list[ImportedProfileEntry], Field(max_length=MAX_PROFILE_VERSIONS)]],
        Field(max_length=20),
    ] = Field(default_factory=dict)


class ProfileImportBatch(Model):
    """Body of ``POST .../import/profiles``: 1 to 100 profiles, each written as exported
    (replacing what the actor holds of those fields and their histories)."""

    profiles: Annotated[list[ImportedProfile], Field(min_length=1, max_length=100)]


class ProfileImportResult(View):
    """Answer of ``POST .../import/profiles``: how many profiles were written."""

    imported: int
