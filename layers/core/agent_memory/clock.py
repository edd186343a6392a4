"""Clock port: the core asks it for the time so tests can move time without sleeping."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...


class SystemClock:
    """The machine's clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)


def to_ms(moment: datetime) -> int:
    """Milliseconds since the Unix epoch (the unit of every time kept in Redis)."""
    return int(moment.timestamp() * 1000)


def from_ms(ms: int | str) -> datetime:
    """Inverse of :func:`to_ms`; accepts the string form Redis hands back."""
    return datetime.fromtimestamp(int(ms) / 1000, tz=UTC)
