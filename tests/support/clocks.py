"""Clocks that tests set by hand."""

from datetime import UTC, datetime


class MovableClock:
    """A clock the test moves by hand (the store's keys still expire on Redis's own clock)."""

    def __init__(self) -> None:
        self.moment = datetime.now(UTC)

    def now(self) -> datetime:
        return self.moment
