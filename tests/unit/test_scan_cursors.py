"""A SCAN cursor sent back by a caller is one Redis can take, or it is refused before any read
(``agent_memory.database.cursors``): found by fuzzing, a 20-digit number above 2**64 reached
the server and failed an export with a 500."""

from __future__ import annotations

from hypothesis import given, strategies as st

from agent_memory.database.cursors import SCAN_CURSOR_END, scan_cursor


@given(st.integers(min_value=0, max_value=SCAN_CURSOR_END - 1))
def test_every_number_redis_can_answer_as_a_cursor_is_read_back(number: int) -> None:
    assert scan_cursor(str(number)) == number


@given(st.integers(min_value=SCAN_CURSOR_END, max_value=10**20 - 1))
def test_a_number_of_2_to_the_64_or_more_is_refused_though_it_has_20_digits(number: int) -> None:
    assert len(str(number)) == 20
    assert scan_cursor(str(number)) is None


@given(st.text(max_size=24))
def test_any_text_is_a_cursor_below_2_to_the_64_or_refused(text: str) -> None:
    number = scan_cursor(text)
    if number is None:
        return
    assert text.isascii() and text.isdigit() and int(text) == number < SCAN_CURSOR_END


def test_digits_of_other_scripts_and_signs_are_refused() -> None:
    for text in ["²", "١٢", "１２", "-1", "+1", " 1", "1 ", "", "0x10", "1e3", "1_000"]:
        assert scan_cursor(text) is None, text
