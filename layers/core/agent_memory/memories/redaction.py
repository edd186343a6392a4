"""Redact personal identifiers from a memory's text before it is kept.

``redact(text)`` replaces every identifier it finds with a marker naming its kind and returns
the new text with the number of replacements per kind. It is pure (no I/O, no global state
besides regexes compiled at import) and runs on every memory write.

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
    13 to 19 digits, written in groups separated by single spaces or
    single dashes (one separator kind throughout) with the layouts 4-4-4-N (N = 1..4),
    4-4-4-4-N (N = 1..3), 4-6-4 (Diners) and 4-6-5 (Amex), passing the Luhn check of
    ISO/IEC 7812-1. A Luhn-failing number stays as it is.
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

* Every detector lists candidate spans in the original text. Where candidates overlap, the
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
  Each changing pass removes at least one ASCII digit or ``@``, so this ends (in practice
  after one pass, or two).
* Text with no ASCII digit and no ``@`` is returned as it is without running any detector
  (the fast path: about 10 microseconds for 2,000 characters). Otherwise 2,000 characters
  with ten identifiers take about a millisecond (docs/redaction.md has the measurements).
* Only ASCII digits count as digits; full-width and other non-ASCII digits are never part
  of an identifier. Everything outside the replaced spans (CJK, emoji, accents, newlines) is
  returned unchanged.
"""

from __future__ import annotations

import bisect
import ipaddress
import re
from dataclasses import dataclass

import phonenumbers
from phonenumbers import Leniency, PhoneNumberMatcher

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


def _card_layout(lengths: list[int]) -> bool:
    """Whether digit groups of these lengths are a card layout (see the module docstring)."""
    if len(lengths) == 1:
        # A digit run with no separator stays (the rule for every kind): unseparated
        # Luhn-passing runs are mostly ids and millisecond timestamps, not pasted cards.
        return False
    if lengths in ([4, 6, 4], [4, 6, 5]):
        return True
    if len(lengths) == 4 and lengths[:3] == [4, 4, 4]:
        return 1 <= lengths[3] <= 4
    if len(lengths) == 5 and lengths[:4] == [4, 4, 4, 4]:
        return 1 <= lengths[4] <= 3
    return False


def _cards(text: str) -> tuple[list[tuple[int, int, str]], list[tuple[int, int]]]:
    """Card candidates (card-shaped windows passing Luhn) and every card-shaped window, Luhn
    or not: a phone candidate that touches one is dropped (a card's digits are never a phone,
    and neither are a Luhn-failing card's)."""
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
                if not _card_layout(lengths[i : j + 1]):
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


# --- phone numbers ---------------------------------------------------------------------------

_DATE = re.compile(
    r"""
    (?P<first>[0-9](?<![0-9][0-9])(?<![0-9][-/.][0-9])[0-9]{0,3})     # not glued to a number
    (?P<sep>[-/. ])(?P<second>[0-9]{1,2})(?P=sep)(?P<third>[0-9]{1,4})
    (?![0-9]|[-/.][0-9])
    """,
    re.ASCII | re.VERBOSE,
)

_TIME = re.compile(
    r"(?P<hour>[0-9](?<![0-9][0-9])(?<![0-9]:[0-9])[0-9]?)"
    r":[0-5][0-9](?::[0-5][0-9](?:[.,][0-9]+)?)?(?![0-9])",
    re.ASCII,
)

_DIGIT_RUN = re.compile(r"[0-9]+", re.ASCII)


def _dates_and_times(text: str) -> list[tuple[int, int]]:
    """Spans of plausible dates and times of day, which are never phone numbers."""
    spans: list[tuple[int, int]] = []
    for m in _DATE.finditer(text):
        first, sep, second, third = m.group("first", "sep", "second", "third")
        a, b = int(first), int(second)
        if len(first) == 4 and sep != " " and len(third) <= 2:
            ok = 1 <= b <= 12 and 1 <= int(third) <= 31  # year-month-day
        elif len(first) <= 2 and len(third) in ((4,) if sep == " " else (2, 4)):
            ok = a >= 1 and b >= 1 and ((a <= 31 and b <= 12) or (a <= 12 and b <= 31))
        else:
            ok = False
        if ok:
            spans.append((m.start(), m.end()))
    for m in _TIME.finditer(text):
        if int(m.group("hour")) <= 24:
            spans.append((m.start(), m.end()))
    return spans


# Digit runs closer than this belong to one phone search window (``(415) 555-2671 ext. 123``).
_PHONE_GAP = 16
# Context given to libphonenumber on each side of a window (``+``, ``(``, ``tel:``, a letter).
_PHONE_MARGIN = 8
# libphonenumber's failed attempts per window (``max_tries``): 16, plus one per 32 characters.
# Each costs 10 to 60 us; the cap keeps digit soup (``1/2/1/2/...``, long lists of numbers)
# linear and cheap, at the price of missing a phone number buried deep inside such soup.
_PHONE_TRIES = 16
_PHONE_TRIES_PER_CHARS = 32


def _phone_windows(text: str, skip: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Where libphonenumber looks: clusters of digit runs (runs at most ``_PHONE_GAP`` apart)
    with ``_PHONE_MARGIN`` characters of context on each side, never reaching into a ``skip``
    span (sorted, non-empty) and never spanning one."""
    windows: list[tuple[int, int]] = []
    k = 0  # index of the first skip span that ends after the current run
    lo = 0  # where the current window may start at the earliest (end of the last skip span)
    cluster: tuple[int, int] | None = None
    for run in _DIGIT_RUN.finditer(text):
        rs, re_ = run.span()
        crossed = False
        while k < len(skip) and skip[k][1] <= rs:
            lo = max(lo, skip[k][1])
            k += 1
            crossed = True
        if k < len(skip) and skip[k][0] < re_:
            continue  # the run lies (at least partly) in a skipped span
        if cluster is not None and (crossed or rs - cluster[1] > _PHONE_GAP):
            windows.append(cluster)
            cluster = None
        first = max(lo, rs - _PHONE_MARGIN) if cluster is None else cluster[0]
        hi = skip[k][0] if k < len(skip) else len(text)
        cluster = (first, min(hi, re_ + _PHONE_MARGIN))
    if cluster is not None:
        windows.append(cluster)
    merged: list[tuple[int, int]] = []
    for ws, we in windows:
        if merged and ws <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(we, merged[-1][1]))
        else:
            merged.append((ws, we))
    return merged


def _phones(
    text: str, region: str | None, skip: list[tuple[int, int]]
) -> list[tuple[int, int, str]]:
    """Phone candidates. libphonenumber runs only on windows around clusters of digit runs,
    which is what makes it affordable on every write, and those windows stay out of the
    ``skip`` spans: dates, times, card-shaped digit groups and the candidates of every other
    kind. A phone number therefore never overlaps another kind's candidate (the other kind
    wins), and the matcher spends no time on dates or IP addresses."""
    found: list[tuple[int, int, str]] = []
    for ws, we in _phone_windows(text, sorted(skip)):
        tries = _PHONE_TRIES + (we - ws) // _PHONE_TRIES_PER_CHARS
        for m in PhoneNumberMatcher(text[ws:we], region, leniency=Leniency.VALID, max_tries=tries):
            raw = m.raw_string.strip()  # libphonenumber may keep a leading space
            start = ws + m.start + len(m.raw_string) - len(m.raw_string.lstrip())
            end = start + len(raw)
            if any(c.isdigit() and c not in _ASCII_DIGITS for c in raw):
                continue  # full-width or other non-ASCII digits are not identifiers here
            if not raw.startswith("+"):
                # The digit-run rule: the number's digits (extension aside) must not be one run.
                first_run = _DIGIT_RUN.search(raw)
                extension = len(m.number.extension or "")
                number_digits = sum(c in _ASCII_DIGITS for c in raw) - extension
                if first_run is None or len(first_run.group()) >= number_digits:
                    continue
            if _glued(text, start, end):
                continue
            found.append((start, end, "phone"))
    return found


# --- the entry point -------------------------------------------------------------------------


def redact(text: str, *, default_region: str | None = "US") -> Redaction:
    """Replace the emails, phone numbers, payment card numbers, US social security numbers and
    IP addresses in ``text`` with ``[email]``, ``[phone]``, ``[card]``, ``[ssn]`` and ``[ip]``.

    ``default_region`` (an ISO 3166-1 alpha-2 code that libphonenumber knows, e.g. ``"US"``,
    ``"GB"``) is the region of phone numbers written without ``+`` and a country code; with
    ``None`` only international numbers (``+44 20 7946 0958``) are phone numbers. An unknown
    region raises ``ValueError``.

    Shapes and sources: see the module docstring (Luhn: ISO/IEC 7812-1; SSN rules: SSA,
    https://www.ssa.gov/employer/randomization.html; phone numbers: Google libphonenumber;
    IPv6 text forms: RFC 4291 section 2.2 and RFC 5952).

    Candidates are found in the original text first: emails, IP addresses, cards and SSNs,
    then phone numbers outside their spans and outside dates and times. Where candidates
    overlap the longest wins, then the kind priority email, ip, card, ssn, phone; the kept
    spans are replaced from right to left. This repeats until the text no longer changes, so
    ``redact(redact(x).text).text == redact(x).text``, and the counts add up over the passes.
    Everything outside the replaced spans, Unicode included, is returned unchanged; text with
    no ASCII digit and no ``@`` is returned at once.
    """
    if default_region is not None and default_region not in phonenumbers.SUPPORTED_REGIONS:
        raise ValueError(f"unknown phone region {default_region!r}")
    counts = dict.fromkeys(KINDS, 0)
    # Until nothing changes: a number left alone because it was glued to a neighbour (the
    # ``-`` of ``+44 20 7946 0958-10.0.0.1``) is free once the neighbour is a marker, and the
    # result must be a fixed point. Every pass that changes the text removes at least one
    # ASCII digit or ``@`` (every identifier holds one, no marker does), so this ends.
    while True:
        spans = _find(text, default_region)
        if not spans:
            return Redaction(text, {k: n for k, n in counts.items() if n})
        text = _replace(text, spans, counts)


def _find(text: str, region: str | None) -> list[tuple[int, int, str]]:
    """The spans to replace: every candidate, overlaps resolved (see ``redact``)."""
    has_at = "@" in text
    has_digit = _ASCII_DIGIT.search(text) is not None
    if not has_at and not has_digit:
        return []  # the fast path: no identifier holds neither an ASCII digit nor an '@'

    candidates: list[tuple[int, int, str]] = _emails(text) if has_at else []
    if has_digit:
        cards, shaped = _cards(text)
        candidates += _ips(text)
        candidates += cards
        candidates += _ssns(text)
        skip = [(s, e) for s, e, _ in candidates] + _dates_and_times(text) + shaped
        candidates += _phones(text, region, skip)
    if len(candidates) < 2:
        return candidates

    # Overlaps: longest first, then kind priority, then leftmost; keep what does not overlap.
    # The kept spans never overlap, so sorted by start their ends are sorted too: a candidate
    # only has to be checked against its two neighbours.
    candidates.sort(key=lambda c: (c[0] - c[1], _PRIORITY[c[2]], c[0]))
    starts: list[int] = []
    ends: list[int] = []
    kept: list[tuple[int, int, str]] = []
    for cand in candidates:
        start, end, _ = cand
        i = bisect.bisect_right(starts, start)
        if (i > 0 and ends[i - 1] > start) or (i < len(starts) and starts[i] < end):
            continue
        starts.insert(i, start)
        ends.insert(i, end)
        kept.append(cand)
    return kept


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
