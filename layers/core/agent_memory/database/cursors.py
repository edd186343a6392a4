"""The SCAN cursors a caller sends back inside our paging cursors, read in one place.

Redis' ``SCAN``, ``HSCAN`` and ``SSCAN`` cursors are unsigned 64-bit integers (the server's
``dictScan`` cursor, https://redis.io/docs/latest/commands/scan/): a larger number, or text that
is not a number, is the server's ``ERR invalid cursor``, which would reach the caller as a 500.
So a cursor from a caller is checked here first, and anything that cannot be one of ours is a
``ValidationFailed`` in words, before any read. (Found by ``make test``'s fuzzing: the 20-digit
cursor ``29336603779746564944`` passed a length check and failed the export with a 500.)
"""

from __future__ import annotations

import re

SCAN_CURSOR = re.compile(r"[0-9]{1,20}")
"""ASCII digits only: ``str.isdigit`` also takes superscripts and other scripts' digits, some
of which ``int`` refuses."""

SCAN_CURSOR_END = 2**64
"""The first number that is not a SCAN cursor."""


def scan_cursor(text: str) -> int | None:
    """The SCAN cursor written as ``text``, or None when ``text`` cannot be one: not 1 to 20
    ASCII digits, or a number of 2**64 or more."""
    if not SCAN_CURSOR.fullmatch(text):
        return None
    number = int(text)
    return number if number < SCAN_CURSOR_END else None
