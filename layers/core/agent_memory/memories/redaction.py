"""Redact personal identifiers from a memory's text before it is kept.

``redact(text)`` replaces every identifier it finds with a marker naming its kind and returns
the new text with the number of replacements per kind. It is pure (no I/O, no global state
besides regexes and tables built at import and a bounded cache of how characters read) and runs
on every memory write.

Kinds, markers and shapes (docs/redaction.md has the full rules and the limits):

``[email]``
    ``local@domain.tld``. The local part is a subset of the RFC 5322 ``dot-atom``: atoms of
    ASCII letters, digits and ``_ % + -`` (an apostrophe only inside an atom, ``o'brien``),
    joined by single dots; so plus-addressing works. The domain is one or more labels and a
    top-level domain (2 to 63 ASCII letters, an ``xn--`` A-label, or a non-ASCII label: IDN
    domains such as ``bücher.de`` are matched). ``a@b`` (no dot), ``@handle`` mentions and the
    marker ``[email]`` itself are left alone.
``[phone]``
    What Google libphonenumber (the ``phonenumbers`` port, ``PhoneNumberMatcher`` with leniency
    ``VALID``) finds for the given default region, extension included (``ext. 123``, ``x123``,
    ``;ext=123``), on top of which: a number whose digits form one run without separators is
    kept unless it starts with ``+`` (``4155552671`` stays, ``+14155552671`` goes); a number
    written with non-ASCII digits (full-width ``\\uff14...``) is kept; a number that overlaps a
    date (``2023-05-08``, ``08.05.2023``, ``08 05 2023``), a time (``12:30``, ``12:30:45``) or a
    card-shaped group of digits is kept; a number glued to surrounding text (a letter or digit
    next to it, or ``.``, ``,``, ``:``, ``/``, ``-`` followed by a digit) is kept.
``[card]``
    13 to 19 digits passing the Luhn check of ISO/IEC 7812-1, written as one run of digits
    (``4111111111111111``; not with ``card_digit_runs=False``, the store setting
    ``redact_card_digit_runs``) or in groups separated by single spaces or single dashes (one
    separator kind throughout) with the layouts 4-4-4-N (N = 1..4), 4-4-4-4-N (N = 1..3),
    4-6-4 (Diners) and 4-6-5 (Amex). A Luhn-failing number stays as it is.
``[ssn]``
    US social security number ``AAA-GG-SSSS`` (dashes, or single spaces, one kind throughout)
    that the SSA could have issued (https://www.ssa.gov/employer/randomization.html): area
    not 000, 666 or 900-999, group not 00, serial not 0000. Nine digits without separators
    stay (the digit-run rule).
``[ip]``
    IPv4: four dotted decimal octets 0-255 without leading zeros (what ``ipaddress``
    accepts); a ``:port`` after it is kept (``10.0.0.1:8080`` -> ``[ip]:8080``). IPv6: the text
    forms of RFC 4291 section 2.2 (full, ``::``-compressed, IPv4-embedded ``::ffff:192.0.2.1``)
    and RFC 5952, with an optional ``%zone`` id, validated by ``ipaddress.IPv6Address`` and
    containing at least one decimal digit, so ``::``, ``a::b``, ``std::vector`` and
    ``Foo::Bar::baz`` stay. The brackets of a URL literal go with it (``[2001:db8::1]:443`` ->
    ``[ip]:443``).

How it works:

* The detectors read the text as it looks (``_View``): invisible characters (Unicode format
  characters, category Cf, and the other default-ignorable ones: variation selectors, the
  combining grapheme joiner, Hangul fillers) are dropped, every Unicode space (Zs) reads as a
  space, the hyphen look-alikes (U+2010, U+2011, U+2012, U+2212, U+FE63, U+FF0D) as ``-``,
  the other dashes (Pd: en and em dashes...) as ``-`` between two digits only, and every
  character whose NFKC form is ASCII as that form (full-width ``\\uff20`` for ``@``,
  ``\\uff14`` for ``4``, mathematical and circled digits, ligatures; superscripts and
  subscripts excepted). So ``4111\\u200b1111\\u200b1111\\u200b1111``,
  ``jane\\uff20example.com`` and ``123\\u201345\\u20136789`` are caught. The spans found are
  mapped back to the original text, and what is replaced is the identifier's original
  characters, invisible ones inside it included. Where an invisible character was dropped
  between two ASCII characters that are not both digits, the text is read a second time with
  such characters kept (as the boundaries they were before), and the candidates of both
  readings compete: ``ip\\u200b10.0.0.1`` becomes ``ip\\u200b[ip]`` as before, not a glued
  token.
* Every detector lists candidate spans in the text as read. Where candidates overlap, the
  longest wins, then the kind priority email, ip, card, ssn, phone, then the leftmost; the
  kept spans are replaced from right to left, so no offset shifts. The whole identifier goes
  and nothing else: a span always starts and ends on the identifier's own boundaries, and a
  candidate glued to a longer token (``ORD-2291``, ``1.2.3.4.5``, ``123-45-6789-0``) is
  dropped rather than cut.
* Phone numbers are looked for last, and only outside the spans the other kinds claimed and
  outside dates, times and card-shaped digit groups: a card's digits are never a phone number,
  an email or IP address that contains digits stays one identifier. libphonenumber runs on
  small windows around clusters of digits, with a bounded number of attempts per window.
* The passes repeat until nothing changes, so the result is a fixed point and
  ``redact(redact(x).text).text == redact(x).text``: a number left alone because it was glued
  to a neighbour (``+44 20 7946 0958-10.0.0.1``) is free once the neighbour is a marker.
  Each changing pass removes at least one character that reads as an ASCII digit or ``@``,
  so this ends (in practice after one pass, or two).
* Text that, as read, holds no ``@``, no four digits close together (each within four
  characters of the next, no ASCII letter but ``x`` between) and no digit next to a colon
  can hold no identifier; it is returned as it is without running any detector (the fast
  path: tens of microseconds for 2,000 characters). Otherwise 2,000 characters with ten
  identifiers take a few milliseconds (docs/redaction.md has the measurements).
* Digits are ASCII digits as read: full-width and other digits whose NFKC form is an ASCII
  digit count, other Unicode digits (Arabic-Indic...) never do. A phone number written with
  any non-ASCII digit is kept. Everything outside the replaced spans (CJK, emoji, accents,
  newlines) is returned unchanged.

Where the code is: this module holds the public API, the entry point (``redact`` and the
passes, overlaps and replacement it runs) and the detectors of emails, IP addresses, cards and
SSNs. ``redaction_view`` holds the reading of the text as it looks (``_View``, look-alikes,
invisible characters) with the character classes and the glue rule every detector shares;
``redaction_phones`` holds the phone number detection (libphonenumber in windows, dates and
times).
"""

from __future__ import annotations

import bisect
import ipaddress
import re
from dataclasses import dataclass

import phonenumbers

from agent_memory.memories.redaction_phones import _dates_and_times, _phones
from agent_memory.memories.redaction_view import _ASCII_DIGIT, _ASCII_DIGITS, _glued, _View

__all__ = ["KINDS", "MARKERS", "Redaction", "redact"]

KINDS: tuple[str, ...] = ("email", "phone", "card", "ssn", "ip")
"""Every kind of identifier, in the order ``Redaction.counts`` lists them."""

MARKERS: dict[str, str] = {kind: f"[{kind}]" for kind in KINDS}
"""The marker that replaces an identifier of each kind."""

# When two overlapping candidates have the same length, the lower rank wins.
_PRIORITY: dict[str, int] = {"email": 0, "ip": 1, "card": 2, "ssn": 3, "phone": 4}


@dataclass(frozen=True)
class Redaction:
    """The result of ``redact``: the redacted text and how many identifiers of each kind were
    replaced (only kinds with a count above zero are present)."""

    text: str
    counts: dict[str, int]


# --- email -----------------------------------------------------------------------------------

# Unicode mode on purpose: IDN domain labels may hold any letter. Everything else is ASCII.
_EMAIL = re.compile(
    r"""
    (?<![A-Za-z0-9_%+@-])                                   # not inside a longer local part
    [A-Za-z0-9_%+-]+(?:'[A-Za-z0-9_%+-]+)*                  # first atom
    (?:\.[A-Za-z0-9_%+-]+(?:'[A-Za-z0-9_%+-]+)*)*           # more atoms, single dots
    @
    (?:[^\W_](?:[\w-]{0,61}[^\W_])?\.)+                     # domain labels (IDN allowed)
    (?:
        [A-Za-z]{2,63}(?![A-Za-z0-9-])                      # ASCII top-level domain
      | xn--[A-Za-z0-9-]{1,59}(?![A-Za-z0-9-])              # punycode top-level domain
      | [^\W\d_A-Za-z]{2,63}(?![\w-])                       # non-ASCII top-level domain
    )
    """,
    re.VERBOSE,
)


# How far around an '@' an address can reach (local part at most 64 characters by RFC 5321,
# a domain at most 253).
_EMAIL_BEFORE = 64
_EMAIL_AFTER = 254


def _windows(
    spans: list[tuple[int, int]], before: int, after: int, size: int
) -> list[tuple[int, int]]:
    """The spans widened by ``before``/``after`` characters, clamped, and merged where they
    touch (``spans`` sorted by start)."""
    merged: list[tuple[int, int]] = []
    for s, e in spans:
        s, e = max(0, s - before), min(size, e + after)
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


_LOCAL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_%+-.'")
_DOMAIN_CHARS = re.compile(r"[\w.-]*")
_DOMAIN_START = re.compile(r"[^\W_]")


def _emails(text: str) -> list[tuple[int, int, str]]:
    """Email candidates. The regex runs only over the stretch of local-part characters before
    each ``@`` and of domain characters after it, never over the whole text."""
    found: list[tuple[int, int, str]] = []
    at = text.find("@")
    while at != -1:
        if at == 0 or text[at - 1] not in _LOCAL_CHARS or not _DOMAIN_START.match(text, at + 1):
            at = text.find("@", at + 1)
            continue
        start = at
        while start > 0 and at - start < _EMAIL_BEFORE and text[start - 1] in _LOCAL_CHARS:
            start -= 1
        domain = _DOMAIN_CHARS.match(text, at + 1)
        end = min(domain.end() if domain else at + 1, at + 1 + _EMAIL_AFTER)
        for m in _EMAIL.finditer(text, start, end):
            found.append((m.start(), m.end(), "email"))
        at = text.find("@", max(at + 1, end))
    return found


# --- IP addresses ----------------------------------------------------------------------------

_IPV4 = re.compile(
    r"[0-9](?<![0-9A-Za-z_.][0-9])[0-9]{0,2}(?:\.[0-9]{1,3}){3}(?![0-9A-Za-z_]|\.[0-9])",
    re.ASCII,
)

_IPV6 = re.compile(
    r"""
    (?<![0-9A-Za-z_:.])
    (?P<addr>
        [0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}           # at least two colons
        (?:\.[0-9]{1,3}){0,3}                                # IPv4-embedded tail
    )
    (?:%[0-9A-Za-z_.~-]+)?                                   # zone id (fe80::1%eth0)
    (?![0-9A-Za-z_:]|\.[0-9A-Za-z])
    """,
    re.ASCII | re.VERBOSE,
)

_DOUBLE_COLON = re.compile("::")
_IPV6_LONGEST = 45  # ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255
_ZONE_LONGEST = 64


def _ips(text: str) -> list[tuple[int, int, str]]:
    """IPv4 and IPv6 candidates, each validated by ``ipaddress``. The IPv6 regex only runs near
    a ``::`` unless the text holds six colons or more (an uncompressed address)."""
    found: list[tuple[int, int, str]] = []
    if "." in text:
        for m in _IPV4.finditer(text):
            try:
                ipaddress.IPv4Address(m.group())
            except ValueError:
                continue
            found.append((m.start(), m.end(), "ip"))
    if text.count(":") >= 6:
        windows = [(0, len(text))]
    else:  # an IPv6 address with fewer than six colons has a "::" (at most 45 characters away)
        compressions = [(m.start(), m.end()) for m in _DOUBLE_COLON.finditer(text)]
        windows = _windows(compressions, _IPV6_LONGEST, _IPV6_LONGEST + _ZONE_LONGEST, len(text))
    for ws, we in windows:
        for m in _IPV6.finditer(text, ws, we):
            if not any(c in _ASCII_DIGITS for c in m.group("addr")):
                continue
            try:
                ipaddress.IPv6Address(m.group())
            except ValueError:
                continue
            start, end = m.start(), m.end()
            if start > 0 and end < len(text) and text[start - 1] == "[" and text[end] == "]":
                start, end = start - 1, end + 1  # a URL's IP literal: the brackets go too
            found.append((start, end, "ip"))
    return found


# --- payment cards ---------------------------------------------------------------------------

# A run of ASCII digit groups joined by single spaces or dashes; card windows lie inside one.
_DIGIT_GROUPS = re.compile(r"[0-9]+(?:[ -][0-9]+)*", re.ASCII)
_GROUP = re.compile(r"[0-9]+", re.ASCII)


def _luhn(digits: str) -> bool:
    """The Luhn check digit test of ISO/IEC 7812-1 (``digits`` are ASCII digits only)."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _card_layout(lengths: list[int], digit_runs: bool) -> bool:
    """Whether digit groups of these lengths are a card layout (see the module docstring); a
    single group of 13 to 19 digits is one when ``digit_runs``."""
    if len(lengths) == 1:
        return digit_runs and 13 <= lengths[0] <= 19
    if lengths in ([4, 6, 4], [4, 6, 5]):
        return True
    if len(lengths) == 4 and lengths[:3] == [4, 4, 4]:
        return 1 <= lengths[3] <= 4
    if len(lengths) == 5 and lengths[:4] == [4, 4, 4, 4]:
        return 1 <= lengths[4] <= 3
    return False


def _cards(
    text: str, digit_runs: bool = True
) -> tuple[list[tuple[int, int, str]], list[tuple[int, int]]]:
    """Card candidates (card-shaped windows passing Luhn) and every card-shaped window, Luhn
    or not: a phone candidate that touches one is dropped (a card's digits are never a phone,
    and neither are a Luhn-failing card's). A single run of 13 to 19 digits is card-shaped
    when ``digit_runs``."""
    cards: list[tuple[int, int, str]] = []
    shaped: list[tuple[int, int]] = []
    for run in _DIGIT_GROUPS.finditer(text):
        if run.end() - run.start() < 13:
            continue
        groups = [(g.start(), g.end()) for g in _GROUP.finditer(text, run.start(), run.end())]
        lengths = [e - s for s, e in groups]
        # Separators between consecutive groups: the character after each group but the last.
        seps = [text[e] for _, e in groups[:-1]]
        last = len(groups) - 1
        for i in range(last + 1):
            # A window may start after a space (groups of a sentence), never after a dash.
            if i > 0 and seps[i - 1] != " ":
                continue
            if lengths[i] == 4:  # every layout with separators starts with four digits
                ends = range(i + 1, min(last, i + 4) + 1)
            elif 13 <= lengths[i] <= 19:
                ends = range(i, i + 1)
            else:
                continue
            for j in ends:
                if j > i and seps[j - 1] != seps[i]:
                    break
                if j < last and seps[j] != " ":
                    continue  # and never end before a dash
                start, end = groups[i][0], groups[j][1]
                if not _card_layout(lengths[i : j + 1], digit_runs):
                    continue
                if _glued(text, start, end, plus_glues=True):
                    continue
                shaped.append((start, end))
                if _luhn("".join(text[s:e] for s, e in groups[i : j + 1])):
                    cards.append((start, end, "card"))
    return cards, shaped


# --- US social security numbers --------------------------------------------------------------

_SSN = re.compile(
    r"([0-9](?<![0-9][0-9])[0-9]{2})([- ])([0-9]{2})\2([0-9]{4})(?![0-9])",
    re.ASCII,
)


def _ssns(text: str) -> list[tuple[int, int, str]]:
    """SSN candidates: ``AAA-GG-SSSS`` or ``AAA GG SSSS`` that the SSA could have issued."""
    found: list[tuple[int, int, str]] = []
    for m in _SSN.finditer(text):
        area, group, serial = int(m.group(1)), int(m.group(3)), int(m.group(4))
        if area == 0 or area == 666 or area >= 900 or group == 0 or serial == 0:
            continue
        if _glued(text, m.start(), m.end()):
            continue
        found.append((m.start(), m.end(), "ssn"))
    return found


# --- the entry point -------------------------------------------------------------------------


def redact(
    text: str, *, default_region: str | None = "US", card_digit_runs: bool = True
) -> Redaction:
    """Replace the emails, phone numbers, payment card numbers, US social security numbers and
    IP addresses in ``text`` with ``[email]``, ``[phone]``, ``[card]``, ``[ssn]`` and ``[ip]``.

    ``default_region`` (an ISO 3166-1 alpha-2 code that libphonenumber knows, e.g. ``"US"``,
    ``"GB"``) is the region of phone numbers written without ``+`` and a country code; with
    ``None`` only international numbers (``+44 20 7946 0958``) are phone numbers. An unknown
    region raises ``ValueError``. ``card_digit_runs`` (a store's ``redact_card_digit_runs``)
    says whether a run of 13 to 19 digits without separators that passes the Luhn check is a
    card number; with ``False`` only grouped card numbers (``4111 1111 1111 1111``) are.

    Shapes and sources: see the module docstring (Luhn: ISO/IEC 7812-1; SSN rules: SSA,
    https://www.ssa.gov/employer/randomization.html; phone numbers: Google libphonenumber;
    IPv6 text forms: RFC 4291 section 2.2 and RFC 5952).

    The text is read as it looks (invisible characters dropped, look-alikes read as their
    ASCII forms; see the module docstring). Candidates are found in that reading first:
    emails, IP addresses, cards and SSNs, then phone numbers outside their spans and outside
    dates and times. They are mapped back to the original text; where candidates overlap the
    longest wins, then the kind priority email, ip, card, ssn, phone; the kept spans are
    replaced from right to left. This repeats until the text no longer changes, so
    ``redact(redact(x).text).text == redact(x).text``, and the counts add up over the passes.
    Everything outside the replaced spans, Unicode included, is returned unchanged; text that
    can hold no identifier (no ``@``, no four digits close together, no digit next to a
    colon) is returned at once.
    """
    if default_region is not None and default_region not in phonenumbers.SUPPORTED_REGIONS:
        raise ValueError(f"unknown phone region {default_region!r}")
    counts = dict.fromkeys(KINDS, 0)
    # Until nothing changes: a number left alone because it was glued to a neighbour (the
    # ``-`` of ``+44 20 7946 0958-10.0.0.1``) is free once the neighbour is a marker, and the
    # result must be a fixed point. Every pass that changes the text removes at least one
    # character that reads as an ASCII digit or ``@`` (every identifier holds one, no marker
    # does), so this ends.
    while True:
        spans = _find(text, default_region, card_digit_runs)
        if not spans:
            return Redaction(text, {k: n for k, n in counts.items() if n})
        text = _replace(text, spans, counts)


# Text that can hold an identifier other than an email: four digits, each within four
# characters of the next with no ASCII letter but 'x' between (every card, SSN and IPv4
# address, and every phone number: libphonenumber's numbers have four digits or more, in blocks
# separated by at most four of its punctuation characters, 'x' among them), or a digit next
# to a colon (every IPv6 address with a digit, which the IPv6 rule requires).
_DIGIT_CLUES = re.compile(
    r"[0-9](?:[^0-9A-WYZa-wyz]{0,4}[0-9]){3}|[0-9][0-9A-Fa-f]*:|:[0-9A-Fa-f]*[0-9]", re.ASCII
)


def _find(text: str, region: str | None, card_digit_runs: bool) -> list[tuple[int, int, str]]:
    """The spans of ``text`` to replace: every candidate, overlaps resolved (see ``redact``).

    The detectors run on the text as it looks (``_View``). Where that dropped an invisible
    character between two ASCII characters that are not both digits, they also run on the
    reading that keeps such characters, in which they are boundaries as they were before
    look-alikes were read: ``ip\\u200b10.0.0.1`` reads as the glued token ``ip10.0.0.1`` in the
    first reading and holds the address ``10.0.0.1`` in the second. The candidates of both
    compete. (Between two digits an invisible character never splits a number.)"""
    view = _View(text)
    candidates = _original_spans(text, view, _candidates(view.text, region, card_digit_runs))
    if view.joined:
        kept = _View(text, keep_invisible=True)
        candidates += _original_spans(text, kept, _candidates(kept.text, region, card_digit_runs))
    if len(candidates) < 2:
        return candidates

    # Overlaps: longest first, then kind priority, then leftmost; keep what does not overlap.
    # The kept spans never overlap, so sorted by start their ends are sorted too: a candidate
    # only has to be checked against its two neighbours.
    candidates.sort(key=lambda c: (c[0] - c[1], _PRIORITY[c[2]], c[0]))
    starts: list[int] = []
    ends: list[int] = []
    kept_spans: list[tuple[int, int, str]] = []
    for cand in candidates:
        start, end, _ = cand
        i = bisect.bisect_right(starts, start)
        if (i > 0 and ends[i - 1] > start) or (i < len(starts) and starts[i] < end):
            continue
        starts.insert(i, start)
        ends.insert(i, end)
        kept_spans.append(cand)
    return kept_spans


def _candidates(text: str, region: str | None, card_digit_runs: bool) -> list[tuple[int, int, str]]:
    """Every candidate in ``text`` (a reading), overlapping ones included."""
    has_at = "@" in text
    has_digits = _ASCII_DIGIT.search(text) is not None and _DIGIT_CLUES.search(text) is not None
    if not has_at and not has_digits:
        return []  # the fast path: no '@' and no digits that an identifier could be made of

    candidates: list[tuple[int, int, str]] = _emails(text) if has_at else []
    if has_digits:
        cards, shaped = _cards(text, card_digit_runs)
        candidates += _ips(text)
        candidates += cards
        candidates += _ssns(text)
        skip = [(s, e) for s, e, _ in candidates] + _dates_and_times(text) + shaped
        candidates += _phones(text, region, skip)
    return candidates


def _original_spans(
    text: str, view: _View, candidates: list[tuple[int, int, str]]
) -> list[tuple[int, int, str]]:
    """The candidates of a reading as spans of the original ``text``. A phone number written
    with a non-ASCII digit (full-width, say) is dropped here: only its reading is ASCII."""
    spans = []
    for start, end, kind in candidates:
        start, end = view.span(start, end)
        if kind == "phone" and any(c.isdigit() and not c.isascii() for c in text[start:end]):
            continue
        spans.append((start, end, kind))
    return spans


def _replace(text: str, spans: list[tuple[int, int, str]], counts: dict[str, int]) -> str:
    """Replace non-overlapping spans with their markers, from right to left, so each slice is
    taken from the original text and no offset shifts; ``counts`` is updated in place."""
    pieces: list[str] = []
    tail = len(text)
    for start, end, kind in sorted(spans, reverse=True):
        pieces.append(text[end:tail])
        pieces.append(MARKERS[kind])
        tail = start
        counts[kind] += 1
    pieces.append(text[:tail])
    return "".join(reversed(pieces))
