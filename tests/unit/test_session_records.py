"""What a session keeps: one set of field names for Python and the session Lua, one message
codec, and a meta record read the same way everywhere."""

import ast
import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from agent_memory.clock import from_ms
from agent_memory.database.scripts import WRITES
from agent_memory.sessions import scripts
from agent_memory.sessions.records import (
    LIST_FIELDS,
    ExtractionFields,
    MessageFields,
    SessionFields,
    SessionRecord,
    decode_member,
    encode_message,
    live_meta,
    message_member,
    session_field_names,
)


def _constants(cls: type) -> dict[str, str]:
    return {k: v for k, v in vars(cls).items() if not k.startswith("_")}


def test_the_field_constants_are_exactly_the_records_fields():
    constants = _constants(SessionFields)
    assert all(k == v for k, v in constants.items())
    assert set(constants) == set(SessionRecord.model_fields)
    assert set(session_field_names()) == set(constants) | set(_constants(ExtractionFields))
    assert set(LIST_FIELDS) <= set(constants)


def test_a_session_script_naming_a_field_the_record_does_not_have_fails_to_build():
    with pytest.raises(KeyError, match="no_such_field"):
        scripts.lua(WRITES, "return redis.call('HGET', KEYS[1], $no_such_field)")
    assert scripts.lua(WRITES, "return $read_seq") == WRITES + "return 'read_seq'"


def test_every_session_script_is_built_with_stored_names_only():
    sources = [v for k, v in vars(scripts).items() if k.isupper() and isinstance(v, str)]
    assert len(sources) >= 10
    stored = set(session_field_names())
    for source in sources:
        assert not re.search(r"\$[A-Za-z_]", source)  # every placeholder was replaced
        # Every quoted lower-case word is a stored field, or IF_LIVE's two verbs (the rest are
        # Redis commands, numbers and separators).
        for name in re.findall(r"'([a-z_]+)'", source):
            assert name in stored or name in {"set", "del"}, name


def test_the_numbers_the_append_script_uses_are_the_constants():
    assert f"now - {scripts.ARM_STALE_MS}" in scripts.APPEND
    assert f"now - {scripts.FOLD_REQUEST_STALE_MS}" in scripts.APPEND
    assert f"now - {scripts.ARM_STALE_MS}" in scripts.IMPORT


texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=200)


@given(
    seq=st.integers(min_value=1, max_value=10**15),
    role=st.sampled_from(["user", "assistant", "system", "tool"]),
    content=texts,
    name=st.none() | texts,
    created_ms=st.integers(min_value=-2_208_988_800_000, max_value=32_503_680_000_000),
)
def test_a_message_reads_back_as_it_was_kept(seq, role, content, name, created_ms):
    stored = encode_message(role, content, name, created_ms)
    member = message_member(seq, stored)
    message = decode_member(member)
    assert (message.seq, message.role, message.content, message.name) == (
        seq,
        role,
        content,
        name,
    )
    assert message.created_at == from_ms(created_ms)
    doc = json.loads(stored)
    assert set(doc) <= set(_constants(MessageFields))
    assert (MessageFields.name in doc) == (name is not None)


def test_a_meta_hash_reads_as_a_record_with_empty_fields_absent():
    raw = {
        "seq": "7",
        "created_at": "1700000000000",
        "expires_at": "4102444800000",
        "last_event_at": "1700000000500",
        "read_seq": "3",
        "summary": "",
        "last_error": "",
        "armed_due": "1700000060000",
        "requested_at": "1",
    }
    meta = live_meta("s-1", raw, now_ms=1_700_000_001_000)
    assert meta is not None
    assert meta.life == "1700000000000" and meta.message_count == 7 and meta.unread == 4
    assert meta.summary is None and meta.last_error is None and meta.requested
    assert meta.armed_due == datetime.fromtimestamp(1_700_000_060, UTC)
    assert meta.extraction(running=False, has_model=True).status == "waiting"


def test_a_session_gone_or_expired_has_no_meta():
    assert live_meta("s", {"deleted_expires": "5"}, now_ms=1) is None
    assert live_meta("s", {"seq": "1", "expires_at": "10"}, now_ms=10) is None


def test_the_script_sources_name_fields_only_through_the_template():
    # A field written literally ('read_seq') would survive its renaming in SessionRecord.
    tree = ast.parse(Path(scripts.__file__).read_text(encoding="utf-8"))
    documented = [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef)) and ast.get_docstring(node)
    ]
    docstrings = {id(node.body[0].value) for node in documented}  # type: ignore[attr-defined]
    literals = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]
    assert any("redis.call" in text for text in literals)
    for name in session_field_names():
        assert not [text for text in literals if f"'{name}'" in text], name
