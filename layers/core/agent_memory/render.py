"""One rule for text from callers in prompts and in recall's ``context`` (DESIGN section 4b).

Message content, names, memory texts, topics, summaries and custom type descriptions come from
callers or from a model. Wherever a prompt or the ``context`` string shows one, it is written by
``quote``: a double quote, the text, a double quote, where inside the text

- ``"`` and ``\\`` are escaped as ``\\"`` and ``\\\\``;
- every character that could end the line is escaped: all that ``str.splitlines`` breaks on
  (``\\n \\r \\v \\f``, U+001C-U+001E, U+0085, U+2028, U+2029) and every other control character
  (Unicode category Cc);
- characters that change how a line reads without showing themselves are escaped too: format
  characters (category Cf: bidirectional overrides and isolates, which can make the closing
  quote appear elsewhere to a human reader, as in "Trojan Source", Boucher and Anderson 2021,
  CVE-2021-42574; zero-width spaces; the invisible "tag" characters U+E0000-U+E007F that some
  models read as hidden ASCII), except the zero-width joiner and non-joiner (U+200C, U+200D),
  which emoji sequences and several scripts need; and lone surrogates (category Cs).

The result is a JSON string literal (RFC 8259 section 7): ``json.loads(quote(text)) == text``
for every text (one exception: a lone high surrogate right before a lone low one, which no
request can carry, reads back as the one character they pair to; the line stays one line), and
a model reads it the way it reads JSON. So an item is always exactly one
line, it ends at its first unescaped ``"``, and nothing inside it (a line break of any kind, a
markdown heading, one of our own labels such as ``[12] user, ...`` or ``## Recent messages``)
can start a new line, section or speaker. Everything outside the quotes (numbers, roles, dates,
labels, headings) is written by this service.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

# Category Cf as of Unicode 15.1 (a superset of Python 3.11's Unicode 14), without U+200C and
# U+200D; tests/unit/test_render.py checks it against the running Python's unicodedata.
_FORMAT = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b\u200e\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f"
)
_ESCAPED_SPEC = '"\\\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff' + _FORMAT
"""Every character ``quote`` escapes, as single characters and ``first-last`` ranges."""
_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _spans(spec: str) -> Iterator[tuple[int, int]]:
    """The code point ranges of ``spec`` (``_ESCAPED_SPEC``), first and last included."""
    at = 0
    while at < len(spec):
        if at + 2 < len(spec) and spec[at + 1] == "-":
            yield ord(spec[at]), ord(spec[at + 2])
            at += 3
        else:
            yield ord(spec[at]), ord(spec[at])
            at += 1


def _escape(char: str) -> str:
    short = _SHORT.get(char)
    if short is not None:
        return short
    point = ord(char)
    if point > 0xFFFF:  # as a UTF-16 surrogate pair, the only way JSON writes such a character
        point -= 0x10000
        return f"\\u{0xD800 + (point >> 10):04x}\\u{0xDC00 + (point & 0x3FF):04x}"
    return f"\\u{point:04x}"


# One ``str.translate`` table (about 2,300 entries) escapes a text in one pass in C: a
# regular expression with a Python function per match took seconds on a message made of
# escaped characters.
_TABLE = {
    point: _escape(chr(point))
    for first, last in _spans(_ESCAPED_SPEC)
    for point in range(first, last + 1)
}


MAX_QUOTED_CHARS = 40_000
"""The longest a quoted text may be, quotes and escapes included. Escapes make a text longer
than it is (a tag character takes 12 characters as ``\\udb40\\udc41``), so a 32,000-character
message could otherwise become 384,000 characters of prompt; cut, it stays within a model call's
budget (``background.session_state.CHUNK_CHARS`` counts what is rendered)."""


def _quoted(text: str) -> str:
    return '"' + text.translate(_TABLE) + '"'


def quote(text: str, limit: int = MAX_QUOTED_CHARS) -> str:
    """``text`` as a one-line JSON string literal, with the escapes the module docstring lists.

    ``quote('I said "hi"\\nthen left')`` is ``'"I said \\\\"hi\\\\"\\\\nthen left"'``. Letters,
    digits, punctuation, emoji and every script are kept as they are (not ``\\u`` escaped), so
    a reader sees the text itself.

    When the literal would be longer than ``limit`` characters, it holds the longest start of
    ``text`` that fits, and ``[cut: N more characters]`` follows the closing quote (outside it,
    so it is ours: the text cannot write it); the whole stays within ``limit`` plus that note.
    """
    whole = _quoted(text)
    if len(whole) <= limit:
        return whole
    kept, longest = 0, len(text)  # the longest start whose literal fits, by bisection
    while kept < longest:
        middle = (kept + longest + 1) // 2
        if len(_quoted(text[:middle])) <= limit:
            kept = middle
        else:
            longest = middle - 1
    cut = len(text) - kept
    return f"{_quoted(text[:kept])} [cut: {cut} more character{'s' if cut > 1 else ''}]"


def speaker(role: str, name: str | None) -> str:
    """Who said a message: its role (ours: user, assistant, system or tool) and, when the
    caller gave one, the name quoted: ``user`` or ``user "Caroline"``."""
    return role if name is None else f"{role} {quote(name)}"


def minute(moment: datetime) -> str:
    """``YYYY-MM-DD HH:MM`` of ``moment`` in UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
