"""The stored memory record: one set of field names for Python and the Lua scripts."""

import json
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from agent_memory.database.keys import NO_ACTOR
from agent_memory.database.scripts import WRITES
from agent_memory.memories import scripts as memory_scripts
from agent_memory.memories.records import (
    MemoryFields,
    MemoryRecord,
    decode_record,
    encode_memory,
    field_names,
    raw_record,
    record_json,
    split_memory,
    stored_terms,
)
from agent_memory.search.tokenizer import TOKENIZER_VERSION, term_counts


def test_the_field_constants_are_exactly_the_records_fields():
    constants = {k: v for k, v in vars(MemoryFields).items() if not k.startswith("_")}
    assert all(k == v for k, v in constants.items())
    assert set(constants) == set(MemoryRecord.model_fields) == set(field_names())


def test_a_script_naming_a_field_the_record_does_not_have_fails_to_build():
    with pytest.raises(KeyError, match="no_such_field"):
        memory_scripts.lua(WRITES, "return redis.call('HGET', KEYS[1], $no_such_field)")
    assert memory_scripts.lua(WRITES, "return $text") == WRITES + "return 'text'"


def test_every_script_is_built_with_stored_names_only():
    sources = [
        v
        for k, v in vars(memory_scripts).items()
        if k.isupper() and not k.startswith("_") and isinstance(v, str)
    ]
    assert sources, "the module's scripts"
    for source in sources:
        assert not re.search(r"\$[A-Za-z_]", source)  # every placeholder was replaced
        for name in re.findall(r"'([a-z_]+)'", source):
            if name in ("gen", memory_scripts.KEPT_GEN, memory_scripts.KEPT_FLOOR):  # meta fields
                continue
            assert name in field_names() or name in {"update", "new", "once"}, name


def _record(**fields: object) -> MemoryRecord:
    values: dict[str, object] = {
        "id": "mem_00000000000000000001",
        "text": "Déploie vers eu-west-1 le vendredi",
        "type": "semantic",
        "actor_id": "alice",
        "topics": ["infra"],
        "metadata": {"team": "ops", "n": 2},
        "importance": 0.7,
        "created_at": 1,
        "updated_at": 2,
        "expires_at": 3,
    }
    values.update(fields)
    return MemoryRecord.model_validate(values)


VECTOR = np.arange(1, 385, dtype=np.float32).tobytes()


def test_a_memory_reads_back_as_it_was_written_with_its_vector():
    record = _record()
    stored = encode_memory(record, VECTOR)
    assert "Déploie".encode() in stored  # UTF-8, not \\u escapes
    assert split_memory(stored) == (record_json(record), VECTOR)
    back = decode_record(stored, record.id, "alice")
    assert back == record


def test_the_stored_json_leaves_out_what_the_key_and_the_text_say():
    record = _record(updated_at=1, valid_from=1)
    fields = raw_record(encode_memory(record, VECTOR))
    assert set(fields) == {
        "text",
        "type",
        "topics",
        "metadata",
        "importance",
        "created_at",
        "expires_at",
    }
    assert decode_record(encode_memory(record, VECTOR), record.id, "alice") == record
    assert stored_terms(fields) is None  # computed when an index is built


def test_a_memory_without_an_actor_reads_back_without_one():
    record = _record(actor_id=None)
    assert decode_record(encode_memory(record, VECTOR), record.id, NO_ACTOR).actor_id is None


def test_a_record_of_an_older_version_reads_with_defaults():
    old = b'{"id":"m","text":"t","type":"semantic","created_at":1,"updated_at":1,"expires_at":9}'
    record = decode_record(old, "m", NO_ACTOR)
    assert (record.actor_id, record.topics, record.versions, record.source) == (None, [], [], None)
    assert stored_terms(raw_record(old)) is None
    assert split_memory(old) == (old, None)  # its vector is in the actor's vectors hash


def test_term_counts_a_record_of_before_kept_are_used():
    terms = [TOKENIZER_VERSION, term_counts("groups of dogs")]
    old = json.dumps(
        {
            "id": "m",
            "text": "groups of dogs",
            "type": "semantic",
            "created_at": 1,
            "updated_at": 1,
            "expires_at": 9,
            "terms": terms,
        }
    ).encode()
    assert stored_terms(raw_record(old)) == term_counts("groups of dogs")


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(min_size=1, max_size=200),
    topics=st.lists(st.text(max_size=20), max_size=3),
    metadata=st.dictionaries(st.text(max_size=10), st.text(max_size=20), max_size=3),
    vector=st.binary(min_size=0, max_size=64),
)
def test_the_json_ends_at_the_first_line_feed_whatever_the_text(
    text: str, topics: list[str], metadata: dict[str, str], vector: bytes
):
    """The vector's bytes may hold any byte, the line feed included; the JSON never does, so
    the first line feed always ends it."""
    record = _record(text=text, topics=topics, metadata=metadata)
    stored = encode_memory(record, vector)
    assert b"\n" not in record_json(record)
    assert split_memory(stored) == (record_json(record), vector)
    assert decode_record(stored, record.id, "alice") == record
