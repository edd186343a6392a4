"""Clock port: the core asks it for the time so tests can move time without sleeping."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MILLISECOND = timedelta(milliseconds=1)


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...


class SystemClock:
    """The machine's clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)


def to_ms(moment: datetime) -> int:
    """Milliseconds since the Unix epoch (the unit of every time kept in Redis), whole ones
    (earlier moments rounded down), counted exactly: ``timestamp() * 1000`` in floating point
    reads 16.205 s as 16,204.999... ms, so a time converted to ``datetime`` and back moved by
    one. A naive ``moment`` is local time, as ``datetime.timestamp`` takes it."""
    aware = moment if moment.tzinfo is not None else moment.astimezone()
    return (aware - EPOCH) // MILLISECOND


def from_ms(ms: int | str) -> datetime:
    """Inverse of :func:`to_ms`; accepts the string form Redis hands back."""
    return datetime.fromtimestamp(int(ms) / 1000, tz=UTC)
