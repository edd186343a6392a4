"""How the redaction detectors read a text: as it looks, with a map back to the original.

``redaction.redact`` does not run its detectors on the text as stored but on the text as a
reader sees it (the rules are in the ``redaction`` module docstring, "How it works"):
invisible characters dropped, Unicode spaces read as spaces, hyphen look-alikes as ``-``,
other dashes as ``-`` between two digits, and characters whose NFKC form is ASCII as that form.
This module holds that reading: ``_reading`` (one character), the table of characters that
read otherwise (``_LOOKALIKE_RANGES``) and the search for them (``_lookalikes``), and
``_View``, the read text with the way back from its spans to the original characters. It also
holds the character classes that the reading and the detectors share, and the glue rule
(``_glued``) every detector applies.

Apart from ``redaction`` because it knows no kind of identifier: it is about characters and
positions, with its own tables and its own test (the look-alike table against ``unicodedata``),
and the detectors only consume the text it builds and map their spans back through it.
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata

# --- shared character classes and the glue rule -------------------------------------------

_ASCII_DIGITS = frozenset("0123456789")
_ASCII_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_NUMBER_JOINERS = frozenset(".,:/-")

_ASCII_DIGIT = re.compile(r"[0-9]")


def _glued(text: str, start: int, end: int, *, plus_glues: bool = False) -> bool:
    """Whether ``text[start:end]`` is part of a longer token, so replacing it would leave half
    of something behind: an ASCII letter, digit or ``_`` right next to it; one of ``. , : / -``
    next to it with a digit beyond (a decimal, a date, a range, a longer dotted or dashed
    number); or ``-`` next to it with a letter beyond (``ORD-2291``). With ``plus_glues``, a
    ``+`` right before it also counts (``+`` starts a phone number, not a card)."""
    if start > 0:
        before = text[start - 1]
        if before in _ASCII_WORD or (plus_glues and before == "+"):
            return True
        if before in _NUMBER_JOINERS and start >= 2:
            beyond = text[start - 2]
            if beyond in _ASCII_DIGITS or (before == "-" and beyond in _ASCII_WORD):
                return True
    if end < len(text):
        after = text[end]
        if after in _ASCII_WORD:
            return True
        if after in _NUMBER_JOINERS and end + 1 < len(text):
            beyond = text[end + 1]
            if beyond in _ASCII_DIGITS or (after == "-" and beyond in _ASCII_WORD):
                return True
    return False


# --- what the text looks like: invisible characters and look-alikes ------------------------

# Characters that read as nothing besides the format characters (Cf): the other
# default-ignorable code points of Unicode (DerivedCoreProperties.txt) that are assigned.
_INVISIBLE_OTHER = frozenset(
    [
        *(0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F, 0x3164, 0xFFA0),
        *range(0xFE00, 0xFE10),  # variation selectors 1-16
        *range(0xE0100, 0xE01F0),  # variation selectors 17-256
    ]
)
# Dashes that look like '-' wherever they are. The other dashes (Pd: en dash, em dash...) read
# as '-' only between two digits, so that an em dash after a number does not glue it to a word.
_HYPHENS = frozenset([0x2010, 0x2011, 0x2012, 0x2212, 0xFE63, 0xFF0D])
# How far ``_visible_before`` and ``_visible_after`` look past invisible characters: a longer
# run of them counts as a boundary (and keeps a text made of them linear to read).
_INVISIBLE_RUN = 16
_PRINTABLE_ASCII = frozenset(chr(c) for c in range(0x21, 0x7F))


def _reading(char: str) -> str | None:
    """How one character reads (see the ``redaction`` module docstring): ``""`` for an
    invisible one, ``" "`` for a Unicode space, ``"-"`` for a hyphen look-alike, ``None`` for
    another dash (``-`` between two digits, itself elsewhere), its NFKC form when that is ASCII
    (superscripts and subscripts excepted), and the character itself otherwise."""
    if char.isascii():
        return char
    category = unicodedata.category(char)
    if category == "Cf" or ord(char) in _INVISIBLE_OTHER:
        return ""
    if category == "Zs":
        return " "
    if ord(char) in _HYPHENS:
        return "-"
    if category == "Pd":
        return None
    nfkc = unicodedata.normalize("NFKC", char)
    if nfkc.isascii() and not unicodedata.decomposition(char).startswith(("<super>", "<sub>")):
        return nfkc
    return char


# Every character that ``_reading`` does not return as it is, as code point ranges, from
# Python 3.11's unicodedata (Unicode 14.0); tests/unit/test_redaction.py checks the table
# against ``_reading``. Text with none of them is read as it is, at the cost of one search.
_LOOKALIKE_UNICODE = "14.0.0"
_LOOKALIKE_RANGES = (
    "00A0 00AD 0132-0133 017F 01C7-01CC 01F1-01F3 034F 037E 058A 05BE 0600-0605 061C 06DD "
    "070F 0890-0891 08E2 115F-1160 1400 1680 17B4-17B5 1806 180B-180F 1FEF 2000-2015 "
    "2024-2026 202A-202F 203C 2047-2049 205F-2064 2066-206F 20A8 2100-2102 2105-2106 "
    "210A-210E 2110-2113 2115-2116 2119-211D 2121 2124 2128 212A 212C-212D 212F-2131 "
    "2133-2134 2139 213B 2145-2149 2160-217F 2212 2460-24EA 2A74-2A76 2E17 2E1A 2E3A-2E3B "
    "2E40 2E5D 3000 301C 3030 30A0 3164 3250-325F 32B1-32BF 32CC-32CF 3371-337A 3380-3381 "
    "3383-338B 338E-3394 3396-339A 339C-33A6 33A9-33AD 33B0-33B1 33B3-33B5 33B7-33BB "
    "33BD-33BF 33C2-33C5 33C7-33DD 33FF FB00-FB06 FB29 FE00-FE10 FE13-FE16 FE19 FE30-FE38 "
    "FE47-FE48 FE4D-FE50 FE52 FE54-FE5C FE5F-FE66 FE68-FE6B FEFF FF01-FF5E FFA0 FFF9-FFFB "
    "10EAD 110BD 110CD 13430-13438 1BCA0-1BCA3 1D173-1D17A 1D400-1D454 1D456-1D49C "
    "1D49E-1D49F 1D4A2 1D4A5-1D4A6 1D4A9-1D4AC 1D4AE-1D4B9 1D4BB 1D4BD-1D4C3 1D4C5-1D505 "
    "1D507-1D50A 1D50D-1D514 1D516-1D51C 1D51E-1D539 1D53B-1D53E 1D540-1D544 1D546 "
    "1D54A-1D550 1D552-1D6A3 1D7CE-1D7FF 1F100-1F10A 1F110-1F129 1F12B-1F12E 1F130-1F14F "
    "1F190 1FBF0-1FBF9 E0001 E0020-E007F E0100-E01EF "
)


def _ranges(table: str) -> list[tuple[int, int]]:
    """The code point ranges of a table written ``00A0 2000-200F ...``."""
    found = []
    for item in table.split():
        first, _, last = item.partition("-")
        found.append((int(first, 16), int(last or first, 16)))
    return found


# The search for look-alikes: a character class of the table's Basic Multilingual Plane part,
# which the regex engine looks up in one step, and, only in text holding characters of the other
# planes (emoji, mathematical digits), a class of the table's other ranges behind a lookahead
# that lets every BMP character fail at once. One class of every range would test each
# character of the text against each non-BMP range in turn (ten times slower).
_RANGES = _ranges("".join(_LOOKALIKE_RANGES))
_LOOKALIKE_BMP = re.compile(
    "[" + "".join(chr(a) + (f"-{chr(b)}" if b > a else "") for a, b in _RANGES if b <= 0xFFFF) + "]"
)
_LOOKALIKE_ASTRAL = re.compile(
    "(?=[\U00010000-\U0010ffff])["
    + "".join(chr(a) + (f"-{chr(b)}" if b > a else "") for a, b in _RANGES if a > 0xFFFF)
    + "]"
)


def _lookalikes(text: str) -> list[int]:
    """Where the characters that read otherwise are in ``text``, in order."""
    if text.isascii():
        return []
    found = [m.start() for m in _LOOKALIKE_BMP.finditer(text)]
    if max(text) > "\uffff":
        astral = [m.start() for m in _LOOKALIKE_ASTRAL.finditer(text)]
        if astral:
            found = sorted(found + astral)
    return found


# ``_reading``, remembered for the characters met most recently (a bounded cache: a text may
# hold any of Unicode's characters).
_read = functools.lru_cache(maxsize=4096)(_reading)


class _View:
    """The text as the detectors read it, and the way back to the original text.

    ``text`` is built from segments: runs copied from the original (one view character per
    original character) and the readings of single characters (zero or more view characters
    for one original character). ``span`` maps a span of ``text`` to the original characters
    it comes from: a span that starts or ends inside the reading of one character (the
    ``...`` of an ellipsis) widens to that whole character."""

    __slots__ = ("_copied", "_sources", "_starts", "joined", "text")

    def __init__(self, original: str, *, keep_invisible: bool = False) -> None:
        pieces: list[str] = []
        starts: list[int] = []  # where each segment starts in the view
        sources: list[int] = []  # where it starts in the original
        copied: list[bool] = []  # whether it is copied (else the reading of one character)
        size = 0  # the view's length so far
        last = 0  # the original index up to which the text is read
        # Whether an invisible character stands between two ASCII characters, not both digits.
        self.joined = False
        for at in _lookalikes(original):
            char = original[at]
            reading = _read(char)
            if reading is None:  # a dash: '-' between two digits, else itself
                reading = "-" if _between_digits(original, at) else char
            elif not reading and (keep_invisible or not self.joined):
                # An invisible character: between two digits it never splits the number; the
                # text holds a boundary the second reading keeps where it stands between two
                # other ASCII characters.
                before = _visible_before(original, at)
                boundary = False
                if before in _PRINTABLE_ASCII:  # (not "" either: a set of characters)
                    after = _visible_after(original, at)
                    boundary = after in _PRINTABLE_ASCII and not (
                        before in _ASCII_DIGITS and after in _ASCII_DIGITS
                    )
                if keep_invisible and boundary:
                    continue
                self.joined = self.joined or boundary
            if reading == char:
                continue
            if at > last:
                pieces.append(original[last:at])
                starts.append(size)
                sources.append(last)
                copied.append(True)
                size += at - last
            if reading:
                pieces.append(reading)
                starts.append(size)
                sources.append(at)
                copied.append(False)
                size += len(reading)
            last = at + 1
        if not pieces:
            self.text, self._starts, self._sources, self._copied = original, [0], [0], [True]
            return
        pieces.append(original[last:])
        starts.append(size)
        sources.append(last)
        copied.append(True)
        self.text = "".join(pieces)
        self._starts, self._sources, self._copied = starts, sources, copied

    def _origin(self, index: int) -> int:
        """The original index of the character ``text[index]`` comes from."""
        k = bisect.bisect_right(self._starts, index) - 1
        if self._copied[k]:
            return self._sources[k] + index - self._starts[k]
        return self._sources[k]

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original span of ``text[start:end]`` (``end > start``)."""
        return self._origin(start), self._origin(end - 1) + 1


def _between_digits(text: str, at: int) -> bool:
    """Whether ``text[at]`` stands between two digits (as they read, past invisible ones)."""
    return _visible_before(text, at) in _ASCII_DIGITS and _visible_after(text, at) in _ASCII_DIGITS


def _visible_after(text: str, at: int) -> str:
    """How the first character after ``text[at]`` that is not invisible reads (the first
    character of its reading), or ``""`` at the end of the text."""
    for char in text[at + 1 : at + 1 + _INVISIBLE_RUN]:
        reading = _read(char)
        if reading is None:
            return char
        if reading:
            return reading[0]
    return ""


def _visible_before(text: str, at: int) -> str:
    """How the last character before ``text[at]`` that is not invisible reads (the last
    character of its reading), or ``""`` at the start of the text."""
    for char in reversed(text[max(0, at - _INVISIBLE_RUN) : at]):
        reading = _read(char)
        if reading is None:
            return char
        if reading:
            return reading[-1]
    return ""
