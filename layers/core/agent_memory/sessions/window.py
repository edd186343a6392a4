"""Which recent messages recall shows: a window whose first message stays put from turn to
turn, so that a provider's prompt cache can serve the context up to its memories
(docs/background.md, "Recall's context").

A window of the newest ``summarize_after`` messages would move by one message at every turn
once a session outgrew it, and the context's prefix would change at every turn with it: the
newest messages slide in at the end, and the oldest slide out at the start, where the prefix
begins. ``bench/prefix_cache.py`` measured that on LoCoMo with the scripted model: a fold is a
background run (extraction, then summarization) that lands some turns after the append that
asked for it, and for those turns (7 of the 14 between two folds) the window slid and the
prefix was lost. So the window starts after the last folded message and moves only in jumps:

- while the unfolded messages are at most ``summarize_after``, all of them;
- in a store with a language model, while a fold the session asked for is under way, all of
  them up to ``summarize_after + (summarize_after - keep_recent)`` (the fold then removes the
  oldest ``summarize_after - keep_recent`` of them at once, as the window would);
- past that, or in a store without a language model (which never folds), the window jumps as a
  fold would: by ``summarize_after - keep_recent`` messages at a time, so that it holds between
  ``keep_recent + 1`` and ``summarize_after`` of the newest messages.

Sequence numbers, not counts, place the window, so that a session imported with a message
missing in between (``sessions.transfer``) places it the same way.
"""

from __future__ import annotations


def window_reads(summarize_after: int, keep_recent: int, folds: bool) -> int:
    """How many of the newest messages recall reads so that the window is within them: the
    window's largest size (``summarize_after``, or with ``folds`` one fold more)."""
    return summarize_after + (summarize_after - keep_recent if folds else 0)


def window_start(
    message_count: int, folded_seq: int, summarize_after: int, keep_recent: int, folds: bool
) -> int:
    """The sequence number after which recall shows a session's messages (the module's
    rule): ``folded_seq`` while the window holds every unfolded message, else ``folded_seq``
    plus the fewest jumps of ``summarize_after - keep_recent`` that leave at most
    ``summarize_after`` messages. ``keep_recent < summarize_after`` (``StoreSettings``)."""
    unfolded = message_count - folded_seq
    if unfolded <= window_reads(summarize_after, keep_recent, folds):
        return folded_seq
    jump = summarize_after - keep_recent
    jumps = -(-(unfolded - summarize_after) // jump)  # ceiling division
    return folded_seq + jumps * jump
