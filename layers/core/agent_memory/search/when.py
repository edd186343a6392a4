"""Time in a query: "in May 2023", "on 7 July, 2023", "last week", "two weeks ago", "the weekend
before 4th October, 2023" resolved into the ``occurred_at`` window a search ranks higher
(``memories.ranking``) or, when the caller asks, keeps only (DESIGN section 5; the time-aware
query expansion of Wu et al., "LongMemEval", ICLR 2025, section 5.4).

``time_window(query, reference)`` reads English expressions, by rule, in this order:

- a day: ``7 July, 2023``, ``July 7th 2023``, ``2023-07-07``, or without a year (``on 7 July``,
  the last such day on or before ``reference``): that day;
- a month: ``May 2023``, ``mid-August 2023``, ``the beginning of November 2022`` (the whole
  month), or ``in October`` without a year (the last October that began on or before
  ``reference``; a month name alone counts only after in, during, since, early, mid, late,
  of or last, so that "may" the verb is not a month);
- a season of a year: ``summer 2023`` (June to August; winter is December to February);
- a year: ``in 2022``, ``2024`` (1900 to 2099);
- relative to ``reference``, or to the day the query names ("last week, as mentioned on
  November 6, 2023", which then ends with that day): today, yesterday, tomorrow, last night,
  this / last / next week, weekend, month or year, ``N days / weeks / months / years ago`` (N
  in digits or words up to twelve, "a", "a couple of", "a few");
- ``before`` a day after a week word ("the weekend before 4th October, 2023", "the Monday
  before July 24, 2023"): the seven days up to and including that day (a memory's
  ``occurred_at`` is often the day it was told); ``since`` a day, month or year: from its start
  to ``reference``.

The first expression found decides (a relative one wins over the day it is relative to). None
when the query has none. Windows are ``[start, end)`` in UTC.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "a few": 3,
    "couple of": 2,
    "few": 3,
}
SEASONS = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}
"""The month each season (of the northern hemisphere) starts in; each lasts three months."""

_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_NUMBER = "|".join(sorted(map(re.escape, NUMBERS), key=len, reverse=True))
_ORD = r"(?:st|nd|rd|th)?"
_YEAR = r"(19\d{2}|20\d{2})"
_DAY_FIRST = re.compile(rf"\b(\d{{1,2}}){_ORD}\s+(?:of\s+)?({_MONTH})\.?,?\s+{_YEAR}\b", re.I)
_MONTH_FIRST = re.compile(rf"\b({_MONTH})\.?\s+(\d{{1,2}}){_ORD},?\s+{_YEAR}\b", re.I)
_ISO_DAY = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_DAY_NO_YEAR = re.compile(
    rf"\b(?:on\s+)?(?:(\d{{1,2}}){_ORD}\s+(?:of\s+)?({_MONTH})|({_MONTH})\s+(\d{{1,2}}){_ORD})\b"
    rf"(?!\.?,?\s+(?:19|20)\d{{2}})",
    re.I,
)
_MONTH_YEAR = re.compile(rf"\b({_MONTH})\.?,?\s+(?:of\s+)?{_YEAR}\b", re.I)
_MONTH_ALONE = re.compile(
    rf"\b(?:in|during|since|early|mid|late|of|last)[\s-]+(?:the\s+)?({_MONTH})\b(?!\s*\d)", re.I
)
_SEASON = re.compile(rf"\b(spring|summer|fall|autumn|winter)\s+(?:of\s+)?{_YEAR}\b", re.I)
_BARE_YEAR = re.compile(rf"\b{_YEAR}\b")
_AGO = re.compile(rf"\b(\d{{1,3}}|{_NUMBER})\s+(day|week|month|year)s?\s+ago\b", re.I)
_NAMED = re.compile(
    r"\b(today|tonight|yesterday|tomorrow|last\s+night|(?:this|last|next|past)\s+"
    r"(?:week|weekend|month|year))\b",
    re.I,
)
_BEFORE = re.compile(
    r"\b(?:week|weekend|days?|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\s+"
    r"(?:just\s+)?before\s*$",
    re.I,
)
_SINCE = re.compile(r"\bsince\s*$", re.I)
_MAYBE = re.compile(
    rf"\d|\b(?:{_MONTH}|today|tonight|yesterday|tomorrow|night|week|weekend|month|year|ago|"
    r"spring|summer|fall|autumn|winter)",
    re.I,
)
"""Something every expression holds: a query without it has no time, found in one pass (most
queries name none, and the eight expressions cost about 50 us together)."""


@dataclass(frozen=True)
class TimeWindow:
    """``[start, end)`` in UTC, and the words of the query it was read from (``said``)."""

    start: datetime
    end: datetime
    said: str

    def holds(self, moment_ms: int) -> bool:
        """Whether ``moment_ms`` (milliseconds since the epoch) is inside the window."""
        return self._ms(self.start) <= moment_ms < self._ms(self.end)

    @staticmethod
    def _ms(moment: datetime) -> int:
        return int(moment.timestamp() * 1000)


def _day(year: int, month: int, day: int) -> datetime | None:
    try:
        return datetime(year, month, day, tzinfo=UTC)
    except ValueError:
        return None


def _month_start(year: int, month: int) -> datetime:
    return datetime(year, month, 1, tzinfo=UTC)


def _add_months(moment: datetime, months: int) -> datetime:
    index = moment.year * 12 + moment.month - 1 + months
    year, month = divmod(index, 12)
    return _month_start(min(max(year, 1), 9998), month + 1)


def _midnight(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


@dataclass(frozen=True)
class _Found:
    start: datetime
    end: datetime
    at: int  # where in the query it starts
    stop: int  # where it ends
    day: datetime | None = None  # the day it names, for a relative expression to lean on


def _one_day(start: datetime | None) -> tuple[datetime, datetime, bool] | None:
    return None if start is None else (start, start + timedelta(days=1), True)


def _day_first(m: re.Match[str], _: datetime) -> tuple[datetime, datetime, bool] | None:
    return _one_day(_day(int(m[3]), MONTHS[m[2].lower()], int(m[1])))


def _month_first(m: re.Match[str], _: datetime) -> tuple[datetime, datetime, bool] | None:
    return _one_day(_day(int(m[3]), MONTHS[m[1].lower()], int(m[2])))


def _iso_day(m: re.Match[str], _: datetime) -> tuple[datetime, datetime, bool] | None:
    return _one_day(_day(int(m[1]), int(m[2]), int(m[3])))


def _day_no_year(m: re.Match[str], reference: datetime) -> tuple[datetime, datetime, bool] | None:
    month, number = MONTHS[(m[2] or m[3]).lower()], int(m[1] or m[4])
    start = _day(reference.year, month, number)
    if start is not None and start > reference:
        start = _day(reference.year - 1, month, number)
    return _one_day(start)


def _month_year(m: re.Match[str], _: datetime) -> tuple[datetime, datetime, bool] | None:
    start = _month_start(int(m[2]), MONTHS[m[1].lower()])
    return start, _add_months(start, 1), False


def _season(m: re.Match[str], _: datetime) -> tuple[datetime, datetime, bool] | None:
    first, year = SEASONS[m[1].lower()], int(m[2])
    start = _month_start(year - 1, 12) if first == 12 else _month_start(year, first)
    return start, _add_months(start, 3), False


def _month_alone(m: re.Match[str], reference: datetime) -> tuple[datetime, datetime, bool] | None:
    start = _month_start(reference.year, MONTHS[m[1].lower()])
    if start > reference:
        start = _month_start(reference.year - 1, start.month)
    return start, _add_months(start, 1), False


def _year(m: re.Match[str], _: datetime) -> tuple[datetime, datetime, bool] | None:
    return _month_start(int(m[1]), 1), _month_start(int(m[1]) + 1, 1), False


_ABSOLUTE = (
    (_DAY_FIRST, _day_first),
    (_MONTH_FIRST, _month_first),
    (_ISO_DAY, _iso_day),
    (_DAY_NO_YEAR, _day_no_year),
    (_MONTH_YEAR, _month_year),
    (_SEASON, _season),
    (_MONTH_ALONE, _month_alone),
    (_BARE_YEAR, _year),
)
"""The absolute expressions, most precise first: a span one of them read is not read again by
a later one (the year of "16 June, 2023" is not also a year)."""


def _absolute(query: str, reference: datetime) -> list[_Found]:
    """Every absolute expression of ``query``, in no particular order."""
    found: list[_Found] = []
    taken: set[int] = set()
    for pattern, resolve in _ABSOLUTE:
        for m in pattern.finditer(query):
            span = set(range(m.start(), m.end()))
            window = None if span & taken else resolve(m, reference)
            if window is None:
                continue
            taken |= span
            start, end, is_day = window
            found.append(_Found(start, end, m.start(), m.end(), start if is_day else None))
    return found


def _relative(query: str, anchor: datetime) -> _Found | None:
    """The first relative expression of ``query``, resolved against the day ``anchor``."""
    day = _midnight(anchor)
    found: list[_Found] = []
    for m in _NAMED.finditer(query):
        words = " ".join(m[1].lower().split())
        start, end = _named(words, day)
        found.append(_Found(start, end, m.start(), m.end()))
    for m in _AGO.finditer(query):
        raw = m[1].lower()
        count = int(raw) if raw.isdigit() else NUMBERS[" ".join(raw.split())]
        unit = m[2].lower()
        if unit == "day":
            middle = day - timedelta(days=count)
            start, end = middle - timedelta(days=1), middle + timedelta(days=2)
        elif unit == "week":
            start, end = day - timedelta(weeks=count + 1), day - timedelta(weeks=max(count - 1, 0))
        elif unit == "month":
            start = _add_months(day, -count - 1)
            end = _add_months(day, -count + 2)
        else:
            start, end = _month_start(day.year - count, 1), _month_start(day.year - count + 1, 1)
        found.append(_Found(start, end, m.start(), m.end()))
    return min(found, key=lambda f: f.at, default=None)


def _named(words: str, day: datetime) -> tuple[datetime, datetime]:
    """The window of "today", "last week", "next month"... around ``day``."""
    one = timedelta(days=1)
    if words in ("today", "tonight"):
        return day, day + one
    if words in ("yesterday", "last night"):
        return day - one, day
    if words == "tomorrow":
        return day + one, day + 2 * one
    which, unit = words.split()
    shift = {"this": 0, "last": -1, "past": -1, "next": 1}[which]
    monday = day - timedelta(days=day.weekday())
    if unit == "week":
        start = monday + timedelta(weeks=shift)
        return start, start + timedelta(weeks=1)
    if unit == "weekend":  # Saturday and Sunday of the week (Monday to Sunday) shifted
        start = monday + timedelta(days=5 + 7 * shift)
        return start, start + 2 * one
    if unit == "month":
        start = _add_months(_month_start(day.year, day.month), shift)
        return start, _add_months(start, 1)
    start = _month_start(day.year + shift, 1)
    return start, _month_start(day.year + shift + 1, 1)


def time_window(query: str, reference: datetime) -> TimeWindow | None:
    """The ``occurred_at`` window the query's first time expression names (see the module
    docstring), resolved against ``reference`` (a timezone-aware moment: the session's date,
    the body's ``reference_time``, or now); None when it names none. Never raises for any
    text."""
    if not _MAYBE.search(query):
        return None
    reference = reference.astimezone(UTC)
    absolute = sorted(_absolute(query, reference), key=lambda f: f.at)
    named_day = next((f.day for f in absolute if f.day is not None), None)
    relative = _relative(query, named_day or reference)
    if relative is not None:
        end = relative.end
        if named_day is not None:  # "last week, as mentioned on November 6": told that day
            end = max(end, named_day + timedelta(days=1))
        return TimeWindow(relative.start, end, query[relative.at : relative.stop])
    if not absolute:
        return None
    first = absolute[0]
    before = query[: first.at]
    if first.day is not None and _BEFORE.search(before):
        start, end = first.start - timedelta(days=7), first.end
    elif _SINCE.search(before):
        start, end = first.start, max(reference, first.end)
    else:
        start, end = first.start, first.end
    said = query[first.at : first.stop]
    return TimeWindow(start, end, said)
