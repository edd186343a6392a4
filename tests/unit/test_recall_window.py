"""Recall's window of recent messages (``sessions.window``), for any store settings and any
session: it holds every unfolded message while it may, at most ``summarize_after`` past that
(or one fold more while a fold is under way), at least ``keep_recent + 1`` when it had to
move, and it moves only in jumps, so that most turns keep the context's prefix."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given, strategies as st

from agent_memory.sessions.window import window_reads, window_start


@st.composite
def settings(draw):
    summarize_after = draw(st.integers(1, 200))
    keep_recent = draw(st.integers(0, summarize_after - 1))
    return summarize_after, keep_recent, draw(st.booleans())


@given(settings(), st.integers(0, 5_000), st.integers(0, 2_000))
def test_the_window_holds_what_it_may_and_no_more(setting, folded, unfolded):
    summarize_after, keep_recent, folds = setting
    count = folded + unfolded
    start = window_start(count, folded, summarize_after, keep_recent, folds)
    shown = count - start
    assert folded <= start <= count
    assert shown <= window_reads(summarize_after, keep_recent, folds)
    if unfolded <= summarize_after:
        assert shown == unfolded  # nothing left out while the messages fit
    elif folds and unfolded <= 2 * summarize_after - keep_recent:
        assert shown == unfolded  # a fold is under way: it removes them, not the window
    else:
        assert keep_recent + 1 <= shown <= summarize_after
        assert (start - folded) % (summarize_after - keep_recent) == 0  # a fold's jump


@given(settings(), st.integers(0, 1_000), st.integers(1, 600))
def test_the_window_moves_in_jumps_as_messages_come(setting, folded, appends):
    """One message at a time with no fold landing: the window's start never goes back, and it
    moves at most once every ``summarize_after - keep_recent`` messages (plus its first move),
    so every other turn's context starts with the previous turn's."""
    summarize_after, keep_recent, folds = setting
    starts = [
        window_start(folded + n, folded, summarize_after, keep_recent, folds)
        for n in range(appends + 1)
    ]
    assert starts == sorted(starts)
    moves = sum(1 for a, b in pairwise(starts) if a != b)
    assert moves <= appends // (summarize_after - keep_recent) + 1


@given(settings(), st.integers(0, 1_000), st.integers(0, 1_000))
def test_a_fold_that_lands_shows_the_messages_after_it(setting, folded, kept):
    """After a fold (``folded_seq`` moved on, ``keep_recent`` or more messages after it), the
    window starts right after the folded messages."""
    summarize_after, keep_recent, folds = setting
    after = min(kept, summarize_after)
    assert window_start(folded + after, folded, summarize_after, keep_recent, folds) == folded
