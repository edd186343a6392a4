"""The stored memory record: one typed model, and one set of stored field names.

A memory is kept as compact JSON followed by its vector's bytes in its actor's ``memories``
hash (``database.keys.ActorKeys``), one entry per id (``encode_memory``). ``MemoryRecord`` is that
record. Its field names are the stored names, and ``MemoryFields`` holds them as constants for
the code that reads records without the model (the cold build of an index reads tens of
thousands of records, where a model per record would cost a third of the build) and for the
Lua scripts (``scripts``), which are templated with these names: renaming a field of
the model fails the import of a script that still uses the old name, and
``tests/unit/test_records.py`` checks that the constants are exactly the model's fields. So
Python and Lua can never disagree on what a field is called.

Times are milliseconds since the epoch (UTC), as everywhere in the database (``forms.Millis``);
the other forms of a memory are made from a record by ``forms.converted``.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import from_json

from agent_memory.database.keys import NO_ACTOR
from agent_memory.memories.forms import Millis, converted
from agent_memory.memories.models import MemoryLink, MemoryView
from agent_memory.search.selection import NEVER, UNKNOWN, RowFacts, filter_terms
from agent_memory.search.tokenizer import TOKENIZER_VERSION, field_tokens


class StoredSource(BaseModel):
    """Where a memory came from, as stored: the session extraction read it in, the range of
    messages that extraction call read (``first_seq`` to ``last_seq``) and, when the model
    named them, the messages it comes from (``seqs``, within that range); or the
    consolidation run that wrote it (``consolidation_id``); or the version a restore brought
    back (``restored_from``)."""

    model_config = ConfigDict(extra="ignore")

    session_id: str | None = None
    first_seq: int | None = None
    last_seq: int | None = None
    seqs: list[int] | None = None
    consolidation_id: str | None = None
    restored_from: str | None = None


class StoredVersion(BaseModel):
    """A memory's state before a change (``PATCH``) made at ``changed_at`` (ms)."""

    model_config = ConfigDict(extra="ignore")

    text: str
    type: str
    topics: list[str]
    metadata: dict[str, Any]
    importance: float | None
    changed_at: Millis


class MemoryRecord(BaseModel):
    """A memory as kept in Redis. Unknown fields are ignored (a record written by a newer
    version of the code stays readable by an older one).

    ``terms`` is ``[TOKENIZER_VERSION, {token: count}]`` of ``text``
    (``search.tokenizer.term_counts``) in records kept before term counts were left out
    (``encode_memory``); building an index uses them, and computes the counts of every other record
    from its text."""

    model_config = ConfigDict(extra="ignore")

    id: str
    text: str
    type: str
    actor_id: str | None = None
    topics: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    importance: float | None = None
    confidence: float | None = None
    created_at: Millis
    updated_at: Millis
    expires_at: Millis
    source: StoredSource | None = None
    versions: list[StoredVersion] = Field(default_factory=list)
    terms: tuple[int, dict[str, int]] | None = None
    occurred_at: Millis | None = None
    valid_from: Millis | None = None
    valid_until: Millis | None = None
    supersedes: str | None = None
    superseded_by: str | None = None

    @model_validator(mode="after")
    def _valid_from_created(self) -> MemoryRecord:
        if self.valid_from is None:  # records kept before memories could be superseded
            self.valid_from = self.created_at
        return self

    @property
    def current(self) -> bool:
        """Whether no other memory has replaced this one (``valid_until`` is null)."""
        return self.valid_until is None


class MemoryFields:
    """The stored name of every ``MemoryRecord`` field (exactly those; a unit test checks)."""

    id: Final = "id"
    text: Final = "text"
    type: Final = "type"
    actor_id: Final = "actor_id"
    topics: Final = "topics"
    metadata: Final = "metadata"
    importance: Final = "importance"
    confidence: Final = "confidence"
    created_at: Final = "created_at"
    updated_at: Final = "updated_at"
    expires_at: Final = "expires_at"
    source: Final = "source"
    versions: Final = "versions"
    terms: Final = "terms"
    occurred_at: Final = "occurred_at"
    valid_from: Final = "valid_from"
    valid_until: Final = "valid_until"
    supersedes: Final = "supersedes"
    superseded_by: Final = "superseded_by"


F = MemoryFields


def field_names() -> dict[str, str]:
    """``{name: name}`` of every stored field: the mapping Lua sources are templated with
    (``memories.scripts.lua``), taken from the model itself."""
    return {name: name for name in MemoryRecord.model_fields}


VECTOR_MARK: Final = b"\n"
"""Separates a stored memory's JSON from its vector bytes. Compact JSON never holds a raw line
feed (JSON escapes every control character in a string), so the first one ends the JSON."""


def encode_memory(record: MemoryRecord, vector: bytes) -> bytes:
    """A memory as stored in its actor's ``memories`` hash: the record as compact JSON (UTF-8
    text, not ``\\u`` escapes), ``VECTOR_MARK``, then the vector's float32 bytes.

    The JSON leaves out what the hash already says or any reader can rebuild: ``id`` (the
    hash field), ``actor_id`` (the actor bucket of the key), the text's term counts (computed
    when an index is built, ``search.tokenizer.term_counts``), the fields that hold their defaults
    (no topics, metadata, source, versions, links) and ``updated_at`` / ``valid_from`` equal to
    ``created_at``. Record and vector in one hash entry cost one entry and one allocation
    instead of two: for a 384-dimension vector and a record of up to 250 bytes, the value
    fits jemalloc's 1,792-byte size class (docs/design.md, "What a memory costs").

    Records written before this (JSON alone, with every field, the vector in the actor's
    ``vectors`` hash) read the same (``decode_record``, ``split_memory``)."""
    return record_json(record) + VECTOR_MARK + vector


def record_json(record: MemoryRecord) -> bytes:
    """The JSON part of ``encode_memory`` (the ``SUPERSEDE`` script appends the vector an old
    record already has)."""
    update: dict[str, Any] = {"terms": None}
    if record.valid_from == record.created_at:
        update["valid_from"] = None
    exclude = {"id", "actor_id", "terms"}
    if record.updated_at == record.created_at:
        exclude.add("updated_at")
    compact = record.model_copy(update=update)
    return compact.model_dump_json(exclude_defaults=True, exclude=exclude).encode()


def split_memory(raw: bytes) -> tuple[bytes, bytes | None]:
    """A stored memory's JSON and vector bytes (None for a record kept before vectors moved
    into it: its vector is in the actor's ``vectors`` hash)."""
    json, mark, vector = raw.partition(VECTOR_MARK)
    return json, vector if mark else None


def decode_record(raw: bytes, memory_id: str, bucket: str) -> MemoryRecord:
    """A stored memory's record read back (``encode_memory``'s output, or a record of an older
    version of the code: missing fields take their defaults). ``memory_id`` is its hash field
    and ``bucket`` the actor bucket of the hash (``database.keys.actor_bucket``)."""
    return MemoryRecord.model_validate(with_identity(raw_record(raw), memory_id, bucket))


def with_identity(record: dict[str, Any], memory_id: str, bucket: str) -> dict[str, Any]:
    """A raw record (``raw_record``) with what its place in Redis says: its id, its actor, and
    ``updated_at`` when it was left out (equal to ``created_at``)."""
    record[F.id] = memory_id
    record[F.actor_id] = None if bucket == NO_ACTOR else bucket
    if F.updated_at not in record:
        record[F.updated_at] = record[F.created_at]
    return record


def stored_terms(record: dict[str, Any]) -> dict[str, int] | None:
    """The term counts a raw record (a ``from_json`` dict) keeps, if the current tokenizer
    made them."""
    terms = record.get(F.terms)
    if isinstance(terms, list) and len(terms) == 2 and terms[0] == TOKENIZER_VERSION:
        counts: dict[str, int] = terms[1]
        return counts
    return None


def raw_facts(record: dict[str, Any]) -> RowFacts:
    """What the index keeps of a raw record (a ``raw_record`` dict) for selections."""
    valid_until = record.get(F.valid_until)
    occurred = record.get(F.occurred_at)
    topics, metadata = record.get(F.topics) or (), record.get(F.metadata) or {}
    return RowFacts(
        valid_from=int(record.get(F.valid_from) or record[F.created_at]),
        valid_until=NEVER if valid_until is None else int(valid_until),
        occurred=UNKNOWN if occurred is None else int(occurred),
        terms=filter_terms(topics, metadata),
        fields=field_tokens(topics, metadata),
    )


def raw_facts_if_any(record: dict[str, Any]) -> RowFacts | None:
    """``raw_facts``, or None for a record that has nothing a selection reads beyond the
    defaults (current since it was kept, no event time, topics or metadata): most records,
    which a cold build of an index then enters in bulk without a ``RowFacts`` each."""
    if (
        record.get(F.valid_until) is None
        and record.get(F.occurred_at) is None
        and not record.get(F.topics)
        and not record.get(F.metadata)
        and record.get(F.valid_from) in (None, record[F.created_at])
    ):
        return None
    return raw_facts(record)


def record_facts(record: MemoryRecord) -> RowFacts:
    """``raw_facts`` of a typed record."""
    return RowFacts(
        valid_from=record.valid_from or record.created_at,
        valid_until=NEVER if record.valid_until is None else record.valid_until,
        occurred=UNKNOWN if record.occurred_at is None else record.occurred_at,
        terms=filter_terms(record.topics, record.metadata),
        fields=field_tokens(record.topics, record.metadata),
    )


def raw_record(raw: bytes) -> dict[str, Any]:
    """A stored memory's record as a plain dict (keys are ``MemoryFields``; no ``id`` or
    ``actor_id`` unless it was kept before they were left out), for the paths that read many
    records and a few fields of each."""
    return raw_record_and_json(raw)[0]


def raw_record_and_json(raw: bytes) -> tuple[dict[str, Any], bytes]:
    """``raw_record`` and the JSON it was read from (``split_memory``'s first part: what an
    index holds of the record, ``search.index.ActorIndex.records``)."""
    json = split_memory(raw)[0]
    record: dict[str, Any] = from_json(json)
    return record, json


def record_view(record: MemoryRecord, *, with_versions: bool = False) -> MemoryView:
    """The API's view of a record (``versions`` only when asked: ``GET`` of one memory)."""
    if with_versions:
        return converted(record, MemoryView)
    return converted(record, MemoryView, versions=None)


def record_link(record: MemoryRecord) -> MemoryLink:
    """One record as a link of a chain (``MemoryView.chain``)."""
    return converted(record, MemoryLink)
