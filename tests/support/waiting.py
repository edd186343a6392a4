"""Waiting for a state a background run or a schedule brings about: poll with a deadline
(CI runs under load, so a test never sleeps a fixed time and hopes)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    check: Callable[[], T],
    timeout: float,
    what: str,
    *,
    show: Callable[[], object] | None = None,
    every: float = 0.25,
) -> T:
    """The first truthy answer of ``check``, called every ``every`` seconds; an
    ``AssertionError`` naming ``what`` (and what ``show`` gives, when given) after ``timeout``
    seconds without one."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            shown = f": {show()}" if show is not None else ""
            raise AssertionError(f"timed out waiting for {what}{shown}")
        time.sleep(every)
