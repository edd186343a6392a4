"""What most tests use: the project's folder, unique names, the mark for the real datasets, and
waiting for a state with a deadline."""

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from tools.replay import DEFAULT_FILES

ROOT = Path(__file__).resolve().parent.parent.parent
T = TypeVar("T")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


needs_data = pytest.mark.skipif(
    not all(path.is_file() for path in DEFAULT_FILES.values()),
    reason="the LoCoMo / MemoryBank files are not in $KIVIDB_DATA_DIR (default ../shared/data)",
)
"""For tests that replay the real datasets, which are never copied into the project."""


def wait_for(
    check: Callable[[], T],
    timeout: float,
    what: str,
    show: Callable[[], object] | None = None,
    interval: float = 0.25,
) -> T:
    """``check()``'s first truthy answer, asked every ``interval`` seconds; AssertionError
    naming ``what`` (and what ``show()`` gives then, when given) when none came within
    ``timeout`` seconds (CI runs under load: a test that waits for a state polls with a
    deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {show() if show else ''}")
        time.sleep(interval)
