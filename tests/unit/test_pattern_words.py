"""Every pattern a request field is checked with says what it asks for in words: a 422's
``problem`` never shows a regular expression (issue 32: an invalid session id answered
``String should match pattern '^(?:[A-Za-z0-9_:@\\-]...)$'``)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from agent_memory.control.key_models import KeyCreate
from agent_memory.models import PATTERN_WORDS, SessionId, problem_in_words
from tools.openapi import build


def _patterns(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["pattern"]} if isinstance(node.get("pattern"), str) else set()
        return found.union(*(_patterns(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_patterns(v) for v in node))
    return set()


def test_every_pattern_of_the_api_has_words():
    patterns = _patterns(build())
    assert len(patterns) >= 10
    assert sorted(p for p in patterns if p not in PATTERN_WORDS) == []


class _Session(BaseModel):
    session_id: SessionId


@pytest.mark.parametrize("bad", ["a b", ".", "..", "x" * 257, "ä", ""])
def test_a_session_id_error_says_the_rule_in_words(bad):
    with pytest.raises(ValidationError) as caught:
        _Session(session_id=bad)
    problem = problem_in_words(caught.value.errors()[0])
    if bad:  # (the empty one fails the same pattern)
        assert problem == (
            "must be 1 to 256 characters: letters, digits, '.', '_', ':', '@' and '-' "
            "(not '.' or '..' alone)"
        )
    assert "^" not in problem and "[" not in problem


def test_a_pattern_without_words_still_shows_no_regular_expression():
    error = {"type": "string_pattern_mismatch", "msg": "String should match pattern '^x$'"}
    assert problem_in_words({**error, "ctx": {"pattern": "^x$"}}) == (
        "is not in the form this field takes"
    )


def test_a_list_items_pattern_error_is_in_words_too():
    with pytest.raises(ValidationError) as caught:
        KeyCreate.model_validate({"access": "read", "actors": ["ann", "a b"]})
    (error,) = caught.value.errors()
    assert error["loc"] == ("actors", 1)
    assert problem_in_words(error).startswith("must be 1 to 256 characters")
