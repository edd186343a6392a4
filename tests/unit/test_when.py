"""Time in a query (``search.when``): the expressions a user writes, resolved against a
reference moment, and any text at all never raising nor giving an empty or inverted window."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, strategies as st

from agent_memory.search.when import time_window

REFERENCE = datetime(2023, 12, 20, 15, 30, tzinfo=UTC)  # a Wednesday


def day(year: int, month: int, number: int) -> datetime:
    return datetime(year, month, number, tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "start", "end", "said"),
    [
        ("What did James adopt in April 2022?", day(2022, 4, 1), day(2022, 5, 1), "April 2022"),
        ("news shared on 16 June, 2023?", day(2023, 6, 16), day(2023, 6, 17), "16 June, 2023"),
        ("what on June 26, 2023", day(2023, 6, 26), day(2023, 6, 27), "June 26, 2023"),
        ("on the 3rd of March 2021", day(2021, 3, 3), day(2021, 3, 4), "3rd of March 2021"),
        ("notes from 2023-02-28", day(2023, 2, 28), day(2023, 3, 1), "2023-02-28"),
        ("classes joined in mid-August 2023", day(2023, 8, 1), day(2023, 9, 1), "August 2023"),
        ("end of summer 2023", day(2023, 6, 1), day(2023, 9, 1), "summer 2023"),
        ("winter 2023 trips", day(2022, 12, 1), day(2023, 3, 1), "winter 2023"),
        ("what happened in 2022", day(2022, 1, 1), day(2023, 1, 1), "2022"),
        ("painting shared in October?", day(2023, 10, 1), day(2023, 11, 1), "in October"),
        ("trip in December", day(2023, 12, 1), day(2024, 1, 1), "in December"),
        ("on 7 July", day(2023, 7, 7), day(2023, 7, 8), "on 7 July"),
        ("on 25 December", day(2022, 12, 25), day(2022, 12, 26), "on 25 December"),
        ("what did I eat yesterday", day(2023, 12, 19), day(2023, 12, 20), "yesterday"),
        ("plans for today", day(2023, 12, 20), day(2023, 12, 21), "today"),
        ("last week's meeting", day(2023, 12, 11), day(2023, 12, 18), "last week"),
        ("this month", day(2023, 12, 1), day(2024, 1, 1), "this month"),
        ("last year", day(2022, 1, 1), day(2023, 1, 1), "last year"),
        ("last weekend", day(2023, 12, 16), day(2023, 12, 18), "last weekend"),
        ("two weeks ago", day(2023, 11, 29), day(2023, 12, 13), "two weeks ago"),
        ("3 days ago", day(2023, 12, 16), day(2023, 12, 19), "3 days ago"),
        ("a couple of months ago", day(2023, 9, 1), day(2023, 12, 1), "a couple of months ago"),
        (
            "the weekend before 4th October, 2023",
            day(2023, 9, 27),
            day(2023, 10, 5),
            "4th October, 2023",
        ),
        (
            "Tim's issue last week, as mentioned on November 6, 2023",
            day(2023, 10, 30),
            day(2023, 11, 7),
            "last week",
        ),
        ("everything since May 2023", day(2023, 5, 1), REFERENCE, "May 2023"),
    ],
)
def test_each_expression_is_resolved_to_its_window(query, start, end, said):
    window = time_window(query, REFERENCE)
    assert window is not None and (window.start, window.end, window.said) == (start, end, said)


@pytest.mark.parametrize(
    "query",
    ["Where may I go?", "What does Caroline like?", "March on", "in 1850", "3 apples", ""],
)
def test_queries_without_a_time_have_no_window(query):
    assert time_window(query, REFERENCE) is None


def test_a_window_holds_its_start_and_not_its_end():
    window = time_window("in May 2023", REFERENCE)
    assert window is not None
    start = int(window.start.timestamp() * 1000)
    end = int(window.end.timestamp() * 1000)
    assert window.holds(start) and window.holds(end - 1) and not window.holds(end)


REFERENCES = st.datetimes(
    min_value=datetime(1901, 1, 1), max_value=datetime(2098, 12, 31), timezones=st.just(UTC)
)


@given(st.text(max_size=300), REFERENCES)
def test_any_text_gives_no_window_or_a_nonempty_one_naming_its_words(query, reference):
    window = time_window(query, reference)
    if window is not None:
        assert window.start < window.end
        assert window.said and window.said in query
        assert window.end - window.start <= timedelta(days=366 * 200)


@given(
    st.sampled_from(["in May 2023", "on 16 June, 2023", "summer 2023", "in 2022"]),
    st.text(alphabet=st.characters(blacklist_categories=("Nd",)), max_size=40),
    st.datetimes(
        min_value=datetime(2000, 1, 1), max_value=datetime(2090, 1, 1), timezones=st.just(UTC)
    ),
)
def test_an_absolute_date_does_not_depend_on_the_reference_or_on_words_around_it(
    expression, words, reference
):
    alone = time_window(expression, REFERENCE)
    assert alone is not None
    placed = time_window(f"what happened {expression} {words}", reference)
    if placed is not None and placed.said == alone.said:
        assert (placed.start, placed.end) == (alone.start, alone.end)
