"""What a profile field holds (``memories.profile_models.checked_value``) and how an
extraction answer's ``profile`` is read (``background.prompts.profile_answer``): each type
takes exactly its values, whatever a caller or a model sends."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, strategies as st

from agent_memory.background.prompts import profile_answer
from agent_memory.memories.profile_models import (
    MAX_PROFILE_ITEM_CHARS,
    MAX_PROFILE_LIST_ITEMS,
    MAX_PROFILE_TEXT_CHARS,
    checked_value,
)
from agent_memory.models import is_blank
from agent_memory.stores.steering import ProfileField

FIELDS = {
    kind: ProfileField(name=kind, description="d", type=kind)
    for kind in ("text", "list", "number", "boolean", "date")
}
anything = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=6,
)


def _accepted(kind: str, value: object) -> object:
    try:
        return checked_value(FIELDS[kind], value)
    except ValueError:
        return ValueError


@given(anything)
def test_a_value_is_taken_only_by_the_type_it_is(value):
    number = _accepted("number", value)
    assert (number is ValueError) == (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or abs(value) > 1e15
    )
    assert (_accepted("boolean", value) is ValueError) == (not isinstance(value, bool))
    text = _accepted("text", value)
    if text is not ValueError:
        assert isinstance(value, str) and not is_blank(value)
        assert text == value.strip() and len(text) <= MAX_PROFILE_TEXT_CHARS


@given(st.lists(st.text(min_size=1, max_size=250), max_size=25))
def test_a_list_is_strings_each_a_short_text(items):
    taken = _accepted("list", items)
    fits = len(items) <= MAX_PROFILE_LIST_ITEMS and all(
        not is_blank(i) and len(i.strip()) <= MAX_PROFILE_ITEM_CHARS for i in items
    )
    assert (taken is not ValueError) == fits
    if fits:
        assert taken == [i.strip() for i in items]


@pytest.mark.parametrize(
    ("given_value", "kept"),
    [("2024-02-29", "2024-02-29"), (" 2023-05-07 ", "2023-05-07"), ("2023-02-30", ValueError)],
)
def test_a_date_is_a_calendar_day(given_value, kept):
    assert _accepted("date", given_value) == kept


@pytest.mark.parametrize("value", ["20230507", "2023-W19-7", "May 7", 20230507, None])
def test_other_spellings_of_a_date_are_refused(value):
    assert _accepted("date", value) is ValueError


def test_an_answers_profile_keeps_declared_typed_values_and_counts_the_rest():
    fields = list(FIELDS.values())
    values, dropped = profile_answer(
        {"profile": {"text": "x", "number": "7", "boolean": True, "nope": 1, "date": None}},
        fields,
    )
    assert values == {"text": "x", "boolean": True}
    assert dropped == 2  # "7" is no number, "nope" no field; a null says nothing new
    assert profile_answer({"profile": ["text"]}, fields) == ({}, 1)
    assert profile_answer({"memories": []}, fields) == ({}, 0)
