"""The stored memory record: one set of field names for Python and the Lua scripts."""

import re

import pytest

from agent_memory import memory_scripts
from agent_memory.db import WRITES
from agent_memory.records import (
    MemoryFields,
    MemoryRecord,
    decode_record,
    encode_record,
    field_names,
    raw_record,
    stored_terms,
)
from agent_memory.tokenizer import TOKENIZER_VERSION, term_counts


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
            if name in ("gen",):  # the meta hash's own field, not a record's
                continue
            assert name in field_names() or name in {"update", "new", "once"}, name


def test_a_record_reads_back_as_it_was_written_with_its_term_counts():
    record = MemoryRecord(
        id="mem_00000000000000000001",
        text="Déploie vers eu-west-1 le vendredi",
        type="semantic",
        actor_id="alice",
        topics=["infra"],
        metadata={"team": "ops", "n": 2},
        importance=0.7,
        created_at=1,
        updated_at=2,
        expires_at=3,
    )
    stored = encode_record(record)
    assert "Déploie" in stored  # UTF-8, not \\u escapes
    back = decode_record(stored)
    assert back.model_dump(exclude={"terms"}) == record.model_dump(exclude={"terms"})
    assert stored_terms(raw_record(stored)) == term_counts(record.text)
    assert back.terms == (TOKENIZER_VERSION, term_counts(record.text))


def test_a_record_of_an_older_version_reads_with_defaults():
    old = '{"id":"m","text":"t","type":"semantic","created_at":1,"updated_at":1,"expires_at":9}'
    record = decode_record(old)
    assert (record.actor_id, record.topics, record.versions, record.source) == (None, [], [], None)
    assert stored_terms(raw_record(old)) is None
