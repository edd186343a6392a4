"""Phone number detection for ``redaction.redact``: libphonenumber in small windows.

``_phones`` lists the phone candidates of a text as read (``redaction_view``): it runs Google
libphonenumber (``PhoneNumberMatcher``, leniency ``VALID``) only on windows around clusters of
digits, outside the spans of the other kinds and outside dates, times (``_dates_and_times``)
and card-shaped digit groups, with a bounded number of attempts per window, and applies the
rules on top of it (the digit-run rule, non-ASCII digits, the glue rule; the ``redaction``
module docstring lists them).

Apart from ``redaction`` because it is the one detector built on a library rather than a
regex, with its own machinery (search windows, attempt budget, the date and time spans it
must stay out of), and it runs last, on what the other detectors left.
"""

from __future__ import annotations

import re

from phonenumbers import Leniency, PhoneNumberMatcher

from agent_memory.memories.redaction_view import _ASCII_DIGITS, _glued, _read

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
                # The digit-run rule: the number's digits (extension aside) must not be one run,
                # as the number reads: libphonenumber reads through some invisible characters
                # (U+200B, U+2060...), which the second reading keeps (see
                # ``redaction._find``).
                read = raw if raw.isascii() else "".join(c for c in raw if _read(c) != "")
                first_run = _DIGIT_RUN.search(read)
                extension = len(m.number.extension or "")
                number_digits = sum(c in _ASCII_DIGITS for c in raw) - extension
                if first_run is None or len(first_run.group()) >= number_digits:
                    continue
            if _glued(text, start, end):
                continue
            found.append((start, end, "phone"))
    return found
