"""The forms of a memory (``memories.forms``): the view, the export and the import each have
every field the stored record has, nested forms included, and a record goes through each
conversion and back unchanged (hypothesis), so a new field that a form leaves out fails here
and not in a customer's export."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings, strategies as st
from pydantic import BaseModel

from agent_memory.clock import from_ms, to_ms
from agent_memory.memories.forms import converted
from agent_memory.memories.models import MemorySource, MemoryVersion, MemoryView
from agent_memory.memories.records import MemoryRecord, StoredSource, StoredVersion, record_view
from agent_memory.memories.transfer import _record
from agent_memory.memories.transfer_models import (
    ExportedMemory,
    ExportedSource,
    ExportedVersion,
    ImportedMemory,
    ImportedSource,
    ImportedVersion,
)
from agent_memory.models import is_blank

INTERNAL = {"terms"}
"""Record fields no other form carries: the text's term counts, which the index computes."""
FAMILIES: list[tuple[type[BaseModel], list[type[BaseModel]]]] = [
    (MemoryRecord, [MemoryView, ExportedMemory, ImportedMemory]),
    (StoredSource, [MemorySource, ExportedSource, ImportedSource]),
    (StoredVersion, [MemoryVersion, ExportedVersion, ImportedVersion]),
]


@pytest.mark.parametrize(
    ("stored", "form"),
    [(stored, form) for stored, forms in FAMILIES for form in forms],
    ids=lambda c: c.__name__,
)
def test_every_form_has_every_field_the_record_keeps(stored, form):
    missing = set(stored.model_fields) - INTERNAL - set(form.model_fields)
    assert not missing, f"{form.__name__} leaves out {sorted(missing)}"


def test_a_form_that_leaves_out_a_field_is_caught():
    class Narrow(BaseModel):
        id: str
        text: str

    assert set(MemoryRecord.model_fields) - INTERNAL - set(Narrow.model_fields)


START = to_ms(datetime(2020, 1, 1, tzinfo=UTC))
ids = st.text("0123456789abcdef", min_size=20, max_size=20).map(lambda h: "mem_" + h)
words = st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), min_size=1).filter(
    lambda t: not is_blank(t)
)


@st.composite
def records(draw: st.DrawFn) -> MemoryRecord:
    """Records an import takes: times in order, links consistent, versions newest first."""
    created = START + draw(st.integers(0, 10**10))
    updated = created + draw(st.integers(0, 10**8))
    valid_from = created + draw(st.integers(0, 10**6))
    expires = max(updated, valid_from) + draw(st.integers(1, 10**10))
    superseded = draw(st.booleans())
    changed = sorted(draw(st.lists(st.integers(created, updated), max_size=3)), reverse=True)
    seqs = draw(st.one_of(st.none(), st.lists(st.integers(3, 9), max_size=3)))
    memory_id, other = draw(ids), draw(ids)
    return MemoryRecord(
        id=memory_id,
        text=draw(words),
        type=draw(st.sampled_from(["semantic", "episodic", "order_issue"])),
        actor_id=draw(st.one_of(st.none(), st.just("user-7"))),
        topics=draw(st.lists(st.text("abc", min_size=1, max_size=5), max_size=3)),
        metadata=draw(st.dictionaries(st.text("xyz", min_size=1), st.integers(-5, 5), max_size=3)),
        importance=draw(st.one_of(st.none(), st.floats(0, 1))),
        confidence=draw(st.one_of(st.none(), st.floats(0, 1))),
        created_at=created,
        updated_at=updated,
        expires_at=expires,
        source=draw(
            st.one_of(
                st.none(),
                st.just(StoredSource(session_id="s-1", first_seq=2, last_seq=9, seqs=seqs)),
            )
        ),
        versions=[
            StoredVersion(
                text=f"was {n}",
                type="semantic",
                topics=[],
                metadata={},
                importance=None,
                changed_at=at,
            )
            for n, at in enumerate(changed)
        ],
        occurred_at=draw(st.one_of(st.none(), st.integers(0, START))),
        valid_from=valid_from,
        valid_until=min(valid_from + 1, expires) if superseded else None,
        superseded_by=(other if other != memory_id else None) if superseded else None,
        supersedes=None,
    )


@settings(max_examples=150, deadline=None)
@given(records())
def test_a_record_exported_and_imported_is_the_same_record(record):
    if record.valid_until is not None and record.superseded_by is None:
        return  # the generator drew the same id twice: not a chain an import takes
    vector = base64.b64encode(b"\x00\x00\x80\x3f").decode()
    exported = converted(record, ExportedMemory, vector=vector)
    imported = ImportedMemory.model_validate(exported.model_dump(mode="json"))
    assert _record(imported) == record


@settings(max_examples=150, deadline=None)
@given(records())
def test_the_view_shows_every_field_of_the_record_as_the_api_writes_times(record):
    view = record_view(record, with_versions=True)
    for name in set(MemoryRecord.model_fields) - INTERNAL - {"source", "versions"}:
        kept, shown = getattr(record, name), getattr(view, name)
        if isinstance(shown, datetime):
            assert shown == from_ms(kept), name
        else:
            assert shown == kept, name
    assert view.source == (MemorySource(**record.source.model_dump()) if record.source else None)
    assert [to_ms(v.changed_at) for v in view.versions or []] == [
        v.changed_at for v in record.versions
    ]
    assert record_view(record).versions is None


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**42))
def test_a_time_in_milliseconds_goes_to_a_datetime_and_back_unchanged(ms):
    # int(timestamp() * 1000) read 16.205 s as 16,204.999... ms: a record exported and
    # imported again came back one millisecond earlier.
    assert to_ms(from_ms(ms)) == ms
    assert to_ms(from_ms(16_205)) == 16_205


def test_a_view_is_validated_as_the_view_it_claims_to_be():
    record = MemoryRecord(
        id="mem_0",
        text="Ann likes tea",
        type="semantic",
        created_at=1_700_000_000_000,
        updated_at=1_700_000_000_000,
        expires_at=1_800_000_000_000,
    )
    view = record_view(record)
    assert view.model_fields_set >= {"id", "text", "created_at", "valid_from"}
    assert view.valid_from == from_ms(record.created_at)
    assert view.score is None
    assert MemoryView.model_validate(view.model_dump()) == view
