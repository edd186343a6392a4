"""Keyed memories' value filters (``keyed.filters``) agree with LangGraph's in-memory store, the
reference its other stores follow (``langgraph.store.memory._compare_values``), on every JSON
value where the two type systems agree: no booleans beside numbers (Python's ``True == 1``,
which JSON keeps apart) and ordering operators on numbers only (the reference raises on text)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st
from langgraph.store.memory import _compare_values

from agent_memory.errors import ValidationFailed
from agent_memory.keyed.filters import check_filter, listed, matches

scalars = st.one_of(
    st.none(), st.integers(-5, 5), st.floats(-5, 5, allow_nan=False), st.text(max_size=3)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abc"), inner, max_size=3)
    ),
    max_leaves=8,
)
numbers = st.one_of(st.integers(-5, 5), st.floats(-5, 5, allow_nan=False))


@settings(max_examples=400)
@given(stored=st.dictionaries(st.sampled_from("abc"), values, max_size=3), wanted=values)
def test_equality_agrees_with_langgraphs_in_memory_store(stored, wanted):
    conditions = {"a": wanted}
    if isinstance(wanted, dict) and any(k.startswith("$") for k in wanted):
        return
    assert matches(stored, conditions) == _compare_values(stored.get("a"), wanted)


@settings(max_examples=400)
@given(
    stored=numbers,
    ops=st.dictionaries(
        st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]), numbers, min_size=1
    ),
)
def test_operators_on_numbers_agree_with_langgraphs_in_memory_store(stored, ops):
    assert matches({"x": stored}, {"x": ops}) == _compare_values(stored, ops)


@given(stored=st.text(max_size=3), operand=st.text(max_size=3))
def test_ordering_text_compares_by_code_point_and_text_never_orders_against_a_number(
    stored, operand
):
    assert matches({"x": stored}, {"x": {"$gt": operand}}) == (stored > operand)
    assert not matches({"x": stored}, {"x": {"$lt": 1}})
    assert not matches({"x": 1}, {"x": {"$lt": operand}})


def test_booleans_are_not_numbers_and_a_missing_path_is_null():
    assert not matches({"x": True}, {"x": 1})
    assert not matches({"x": 1}, {"x": {"$eq": True}})
    assert matches({}, {"x": None}) and matches({"x": None}, {"x": {"$eq": None}})
    assert not matches({}, {"x": {"$ne": None}})
    assert matches({"u": {"age": 3}}, {"u.age": {"$gte": 3}})


@pytest.mark.parametrize(
    "conditions",
    [
        {"": 1},
        {"a..b": 1},
        {".a": 1},
        {"a.": 1},
        {"a": {"$in": [1]}},
        {"a": {"$eq": 1, "b": 2}},
        {"x" * 257: 1},
        {"access') = 'public' OR '1'='1' OR json_extract(value, '$.": 1},
    ],
)
def test_a_bad_path_or_operator_is_refused_naming_the_filter_key(conditions):
    with pytest.raises(ValidationFailed, match="Invalid filter key") as caught:
        check_filter(conditions)
    assert caught.value.details[0]["field"].startswith("filter.")


@given(
    namespace=st.lists(st.sampled_from(["a", "b", "*", "a*"]), min_size=1, max_size=4),
    prefix=st.lists(st.sampled_from(["a", "b", "*"]), max_size=3),
)
def test_a_wildcard_stands_for_exactly_one_label_and_labels_match_whole(namespace, prefix):
    expected = len(namespace) >= len(prefix) and all(
        p == "*" or p == n for n, p in zip(namespace, prefix, strict=False)
    )
    assert listed(namespace, prefix, None) == expected
    assert listed(namespace, None, prefix) == (
        len(namespace) >= len(prefix)
        and all(p == "*" or p == n for n, p in zip(namespace[::-1], prefix[::-1], strict=False))
    )
